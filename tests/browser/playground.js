"use strict";
// Drives the LangServe playground of a running memory_chain server in headless Chromium, the
// way a person would, and prints what the page showed as one JSON object on stdout. The
// assertions live in tests/api/test_playground.py; this script only looks and reports.
//
//   node playground.js '{"baseUrl": "http://127.0.0.1:8000", "chromium": "/usr/bin/chromium",
//     "conversationId": "pg", "first": "...", "second": "...", "screenshotDir": "/tmp/x"}'
//
// Steps: open /memory/playground/, type the conversation id into Configure, type the first
// message, Start, read the reply; open Share and follow its playground link (the playground's
// only way to keep a config: it is compressed into the URL), reload; read the conversation id
// back, send the second message, and read the intermediate steps (retrieve_memory shows the
// prompt built from memory, with the earlier turns).
//
// Exit status 0 when every step ran, 1 when one failed (the report says which, and why).

const { main } = require("./common");

const INPUT = 'textarea[id="#/properties/input-input"]';
const BUSY = ".opacity-50.pointer-events-none";
const ERROR_BOX = "div.text-red-700";

async function settle(page) {
  // The playground dims the inputs while it fetches the input schema for a new config.
  await page.waitForFunction((busy) => !document.querySelector(busy), BUSY);
  const errors = page.locator(ERROR_BOX).filter({ hasNotText: "Validation Errors" });
  if (await errors.count()) {
    throw new Error(`the playground shows an error: ${await errors.first().innerText()}`);
  }
  await page.locator(INPUT).waitFor();
}

async function configure(page, conversationId) {
  const schemaFetched = page.waitForResponse((r) => r.url().endsWith("/input_schema"));
  await page.getByLabel("Conversation ID").fill(conversationId);
  const response = await schemaFetched;
  await page.waitForTimeout(100); // let React render the answer
  if (!response.ok()) {
    const box = page.locator(ERROR_BOX);
    const shown = (await box.count()) ? await box.first().innerText() : "(nothing shown)";
    throw new Error(
      `after setting the conversation id the playground asked ${response.url()} and got ` +
        `${response.status()}; it shows: ${shown}`,
    );
  }
  await settle(page);
}

async function send(page, message) {
  await page.locator(INPUT).fill(message);
  const start = page.getByRole("button", { name: "Start", exact: true });
  await start.click();
  await page.getByRole("heading", { name: "Output" }).waitFor();
  // While the reply streams the button reads "Stop"; it reads "Start" again when done.
  await page.getByRole("button", { name: "Stop", exact: true }).waitFor({ state: "detached" });
  await start.waitFor();
  return page.locator("h2:text-is('Output') + div").innerText();
}

async function intermediateSteps(page) {
  await page.getByRole("button", { name: /Intermediate steps/ }).click();
  await page.locator("pre").first().waitFor();
  return page.evaluate(() =>
    Array.from(document.querySelectorAll("pre")).map((pre) => {
      const entry = pre.closest("div.min-w-0.flex-col") || pre.parentElement;
      const name = entry.querySelector("strong");
      return { name: name ? name.textContent : null, text: pre.innerText };
    }),
  );
}

async function shareLink(page) {
  await page.getByRole("button", { name: "Share" }).click();
  const link = page.locator("div.overflow-auto", { hasText: "/playground" }).first();
  const shown = (await link.innerText()).trim();
  await page.keyboard.press("Escape");
  await link.waitFor({ state: "detached" });
  return new URL(page.url()).protocol + "//" + shown;
}

main(async ({ options, page, report, shot, screenshot }) => {
  report.step = "open the playground";
  await page.goto(`${options.baseUrl}/memory/playground/`);
  await page.getByLabel("Conversation ID").waitFor();

  report.step = "set the conversation id";
  await configure(page, options.conversationId);

  report.step = "send the first message";
  const firstOutput = await send(page, options.first);
  report.first = { url: page.url(), output: firstOutput };
  await screenshot("1-first-reply.png");

  report.step = "follow the Share link and reload";
  const shared = await shareLink(page);
  await page.goto(shared);
  await page.reload();
  await page.getByLabel("Conversation ID").waitFor();
  await settle(page);
  report.reloaded = {
    url: page.url(),
    sharedLink: shared,
    conversationId: await page.getByLabel("Conversation ID").inputValue(),
    outputShown: await page.getByRole("heading", { name: "Output" }).isVisible(),
  };
  await screenshot("2-after-reload.png");

  report.step = "send the second message";
  const secondOutput = await send(page, options.second);
  report.second = { output: secondOutput, steps: await intermediateSteps(page) };
  await screenshot("3-second-reply-with-steps.png");
  // The whole page is too tall to read at a glance: the output and the first step alone.
  const step = page.locator("div.min-w-0.flex-col", { hasText: "retrieve_memory" }).first();
  await page.locator("h2:text-is('Output') + div").screenshot({ path: shot("4-second-reply.png") });
  await step.screenshot({ path: shot("5-retrieve-memory-step.png") });
  report.screenshots.push(shot("4-second-reply.png"), shot("5-retrieve-memory-step.png"));
});
