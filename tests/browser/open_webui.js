"use strict";
// Drives a real Open WebUI (talking to memory_chain) in headless Chromium as a person would,
// and prints what the page showed as one JSON object on stdout. The assertions live in
// tests/webui/test_open_webui.py; this script only looks and reports.
//
//   node open_webui.js '{"baseUrl": "http://127.0.0.1:3000", "chromium": "/usr/bin/chromium",
//     "email": "ada@example.com", "password": "...", "messages": ["...", "..."],
//     "reload": true, "screenshotDir": "/tmp/x"}'
//
// Steps: sign in; for each message, open a new chat, type it, press Enter, and watch the
// reply grow (the text is sampled every 25 ms while it streams); wait for Open WebUI to name
// each chat (its background title task); then, with "reload", reload the page, read the
// chats listed in the sidebar, and open the first chat again to read its messages.
//
// Every request to a host other than 127.0.0.1 is blocked and listed in "blockedRequests"
// (nothing may leave the machine). Exit status 0 when every step ran, 1 when one failed.

const { main } = require("./common");

const REPLY = ".chat-assistant #response-content-container";
// A finished reply gets a toolbar; its "read aloud" button is there once per reply.
const FINISHED = "button[id^='speak-button-']";

async function signIn(page, options) {
  await page.goto(`${options.baseUrl}/auth`);
  await page.locator("#email").fill(options.email);
  await page.locator("#password").fill(options.password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.waitForURL((url) => !url.pathname.startsWith("/auth"));
  await page.locator("#chat-input").waitFor();
  // A first sign-in shows the release notes once.
  const notes = page.getByRole("button", { name: "Okay, Let's Go!" });
  try {
    await notes.click({ timeout: 5000 });
  } catch {
    // not shown
  }
  await openSidebar(page);
}

// The sidebar starts collapsed to a rail at this width: open it, as a person would.
async function openSidebar(page) {
  const open = page.getByRole("button", { name: "Open Sidebar" }).first();
  if ((await open.count()) && (await open.isVisible())) {
    await open.click();
  }
  await page.locator("#sidebar:not([inert]) a#sidebar-new-chat-button").waitFor();
}

async function replies(page) {
  return page.locator(REPLY).allInnerTexts();
}

// Sends a message in a new chat and samples the reply while it streams.
async function chat(page, message, timeout) {
  await page.locator("a#sidebar-new-chat-button").click();
  await page.waitForURL((url) => url.pathname === "/");
  const before = (await replies(page)).length;
  const finishedBefore = await page.locator(FINISHED).count();
  await page.locator("#chat-input").click();
  await page.keyboard.type(message);
  await page.keyboard.press("Enter");
  const samples = [];
  const deadline = Date.now() + timeout;
  let stableSince = null;
  for (;;) {
    const texts = await replies(page);
    const text = texts.length > before ? texts[texts.length - 1] : null;
    if (text !== null && samples[samples.length - 1] !== text) {
      samples.push(text);
      stableSince = Date.now();
    }
    // Done: the reply has text, has not changed for a second, and its toolbar is shown.
    const done =
      text &&
      stableSince !== null &&
      Date.now() - stableSince > 1000 &&
      (await page.locator(FINISHED).count()) > finishedBefore;
    if (done) break;
    if (Date.now() > deadline) throw new Error(`no complete reply to ${JSON.stringify(message)}`);
    await page.waitForTimeout(25);
  }
  await page.waitForURL((url) => url.pathname.startsWith("/c/"));
  const chatId = new URL(page.url()).pathname.split("/")[2];
  return { message, chatId, samples, reply: samples[samples.length - 1] };
}

async function sidebarChats(page) {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll("#sidebar a[href^='/c/']")).map((a) => ({
      id: a.getAttribute("href").split("/")[2],
      title: a.innerText.trim().split("\n")[0].trim(), // the title, then its age
    })),
  );
}

// Waits until Open WebUI has titled every chat (the title task runs after the reply).
async function waitForTitles(page, chatIds, timeout) {
  const deadline = Date.now() + timeout;
  for (;;) {
    const chats = await sidebarChats(page);
    const titled = chats.filter((c) => chatIds.includes(c.id) && c.title.startsWith("Fake:"));
    if (titled.length === chatIds.length) return chats;
    if (Date.now() > deadline) return chats;
    await page.waitForTimeout(250);
  }
}

async function openChat(page, chatId) {
  await page.locator(`#sidebar a[href='/c/${chatId}']`).click();
  await page.waitForURL((url) => url.pathname === `/c/${chatId}`);
  await page.locator(REPLY).first().waitFor();
  await page.waitForTimeout(500); // let the whole history render
  return {
    // A user message shows its text, then when it was sent.
    user: (await page.locator(".chat-user").allInnerTexts()).map((t) => t.split("\n")[0].trim()),
    assistant: await replies(page),
  };
}

main(async ({ options, page, report, screenshot }) => {
  const timeout = options.timeoutMs || 60000;
  report.chats = [];
  report.step = "sign in";
  await signIn(page, options);
  for (const [number, message] of options.messages.entries()) {
    report.step = `chat ${number + 1}`;
    report.chats.push(await chat(page, message, timeout));
    await screenshot(`chat-${number + 1}.png`);
  }
  report.step = "wait for the chats' titles";
  report.sidebarBeforeReload = await waitForTitles(
    page,
    report.chats.map((c) => c.chatId),
    timeout,
  );
  if (options.reload) {
    report.step = "reload";
    await page.reload();
    await page.locator("#chat-input").waitFor();
    await openSidebar(page);
    await page.locator("#sidebar a[href^='/c/']").first().waitFor();
    report.sidebarAfterReload = await sidebarChats(page);
    report.step = "open the first chat again";
    report.reopened = await openChat(page, report.chats[0].chatId);
    await screenshot("after-reload.png");
  }
});
