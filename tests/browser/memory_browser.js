"use strict";
// Drives memory_chain's memory browser (/ui/) in headless Chromium as a person would and
// prints what the page showed as one JSON object. Assertions: tests/api/test_memory_browser.py.
//
//   node memory_browser.js '{"baseUrl": "...", "chromium": "...", "key": "...",
//     "wrongKey": "...", "conversation": "trip", "query": "Lisbon", "remove": "recipes",
//     "preview": "...", "newFact": "...", "newKind": "preference", "editedFact": "...",
//     "editedKind": "plan", "dismiss": "<a current fact's text>", "screenshotDir": "/tmp/x"}'
//
// Steps: open the page (it asks for a key); connect with a wrong key, then the right one
// (reading the remembered facts); open a conversation (turns, range summaries, running
// summary); search it; preview what the model will see; archive another conversation
// (cancel once, then confirm); purge it. Then the facts: add one through the form (and the
// same one again), edit it (cancel once, then save a new text and kind), delete another
// (cancel once, then confirm), show the history, hide it again.

const { main } = require("./common");

const texts = (page, selector) => page.locator(selector).allInnerTexts();

async function connect(page, key) {
  await page.locator("#api-key").fill(key);
  await page.locator("#connect-button").click();
  // Connected (or refused) once the page is no longer busy loading the caller's memory.
  await page.waitForFunction(() => {
    const who = document.querySelector("#whoami").textContent;
    const settled = !document.body.hasAttribute("aria-busy");
    return settled && (who.startsWith("signed in") || !document.querySelector("#error").hidden);
  });
}

async function conversations(page) {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll("#conversations li[data-id]")).map((li) => ({
      id: li.dataset.id,
      meta: li.querySelector(".meta").innerText,
    })),
  );
}

// The facts panel's items as shown.
async function facts(page) {
  return page.evaluate(() =>
    Array.from(document.querySelectorAll("#facts li[data-id]")).map((li) => {
      const text = (selector) => li.querySelector(selector)?.innerText ?? null;
      return {
        id: li.dataset.id,
        status: li.dataset.status,
        text: text(".text"),
        kind: text(".kind"),
        origin: text(".origin"),
        source: text(".source"),
        since: text(".since"),
        until: text(".until"),
        badge: text(".badge"),
        replacedBy: text(".replaced-by"),
        buttons: Array.from(li.querySelectorAll("button")).map((b) => b.innerText),
      };
    }),
  );
}

// Waits until the facts panel lists a fact with this exact text and status; its id.
async function waitForFact(page, text, status = "current") {
  const found = await page.waitForFunction(
    ([wanted, wantedStatus]) => {
      const item = Array.from(document.querySelectorAll("#facts li[data-id]")).find(
        (li) => li.dataset.status === wantedStatus && li.querySelector(".text")?.textContent === wanted,
      );
      return item ? item.dataset.id : null;
    },
    [text, status],
  );
  return found.jsonValue();
}

async function openConversation(page, id) {
  await page.locator(`#conversations li[data-id='${id}']`).click();
  await page.waitForFunction(
    (wanted) => document.querySelector("#conversation-title").textContent === wanted,
    id,
  );
  await page.locator("#turns li").first().waitFor();
}

// Clicks a button that asks for confirmation, and answers the dialog.
async function confirmVia(page, button, answer) {
  await page.locator(button).click();
  const dialog = page.locator("dialog#confirm");
  await dialog.waitFor();
  const question = await page.locator("#confirm-text").innerText();
  await page.locator(answer === "ok" ? "#confirm-ok" : "#confirm-cancel").click();
  await dialog.waitFor({ state: "hidden" });
  return question;
}

main(async ({ page, options, report, screenshot }) => {
  report.step = "open the page";
  await page.goto(`${options.baseUrl}/ui/`);
  await page.waitForFunction(() => document.querySelector("#whoami").textContent !== "");
  report.opened = { whoami: await page.locator("#whoami").innerText() };

  report.step = "connect with a wrong key";
  await connect(page, options.wrongKey);
  report.wrongKey = { error: await page.locator("#error").innerText() };

  report.step = "connect";
  await connect(page, options.key);
  await page.locator("#conversations li[data-id]").first().waitFor();
  report.connected = {
    whoami: await page.locator("#whoami").innerText(),
    errorHidden: await page.locator("#error").isHidden(),
    conversations: await conversations(page),
    facts: await texts(page, "#facts li .text"),
    factItems: await facts(page),
  };

  report.step = "open a conversation";
  await openConversation(page, options.conversation);
  report.conversation = {
    title: await page.locator("#conversation-title").innerText(),
    meta: await page.locator("#conversation-meta").innerText(),
    runningSummary: await page.locator("#running-summary").innerText(),
    summaries: await texts(page, "#summaries li .text"),
    summaryRanges: await texts(page, "#summaries li .meta"),
    turns: await texts(page, "#turns li .text"),
  };

  report.step = "search";
  await page.locator("#search-query").fill(options.query);
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await page.locator("#results tbody tr").first().waitFor();
  report.search = await page.evaluate(() =>
    Array.from(document.querySelectorAll("#results tbody tr")).map((tr) => ({
      tier: tr.querySelector(".tier")?.innerText,
      sources: tr.querySelector(".sources")?.innerText,
      score: tr.querySelector(".score")?.innerText,
      turn: tr.querySelector(".turn")?.innerText,
      content: tr.querySelector(".text")?.innerText,
    })),
  );
  await screenshot("memory-browser.png");

  report.step = "preview what the model will see";
  await page.locator("#preview-message").fill(options.preview);
  await page.getByRole("button", { name: "Preview", exact: true }).click();
  await page.locator("#preview-sections li").first().waitFor();
  report.preview = {
    budget: await page.locator("#preview-budget").innerText(),
    models: await page.locator("#preview-model option").allInnerTexts(),
    sections: await page.evaluate(() =>
      Array.from(document.querySelectorAll("#preview-sections li.section")).map((li) => ({
        name: li.dataset.section,
        meta: li.querySelector(".meta")?.innerText,
        texts: Array.from(li.querySelectorAll(".text")).map((t) => t.innerText),
      })),
    ),
  };
  await screenshot("memory-browser-preview.png");

  report.step = "archive (cancel, then confirm)";
  await openConversation(page, options.remove);
  const question = await confirmVia(page, "#archive-button", "cancel");
  const afterCancel = await page.locator("#conversation-meta").innerText();
  await confirmVia(page, "#archive-button", "ok");
  await page.waitForFunction(() =>
    document.querySelector("#conversation-meta").textContent.startsWith("archived"),
  );
  report.archive = {
    question,
    afterCancel,
    afterConfirm: await page.locator("#conversation-meta").innerText(),
    listed: await conversations(page),
  };

  report.step = "purge";
  const purgeQuestion = await page.locator("#purge-button").click().then(async () => {
    await page.locator("dialog#confirm").waitFor();
    const text = await page.locator("#confirm-text").innerText();
    await screenshot("purge-confirmation.png", false);
    await page.locator("#confirm-ok").click();
    return text;
  });
  await page.locator("#placeholder").waitFor();
  await page.waitForFunction(
    (gone) => !document.querySelector(`#conversations li[data-id='${gone}']`),
    options.remove,
  );
  report.purge = { question: purgeQuestion, listed: await conversations(page) };

  report.step = "add a fact";
  await page.locator("#fact-text").fill(options.newFact);
  await page.getByRole("combobox", { name: "Kind of the new fact" }).selectOption(options.newKind);
  await page.getByRole("button", { name: "Add fact", exact: true }).click();
  const added = await waitForFact(page, options.newFact);
  report.factAdded = {
    id: added,
    status: await page.locator("#facts-status").innerText(),
    input: await page.locator("#fact-text").inputValue(),
    listed: await facts(page),
  };

  report.step = "add the same fact again";
  await page.locator("#fact-text").fill(options.newFact);
  await page.getByRole("button", { name: "Add fact", exact: true }).click();
  await page.waitForFunction(() =>
    document.querySelector("#facts-status").textContent.startsWith("Already known"),
  );
  report.factAgain = {
    status: await page.locator("#facts-status").innerText(),
    listed: await facts(page),
  };

  report.step = "edit the fact (cancel, then save)";
  const item = page.locator(`#facts li[data-id='${added}']`);
  await item.getByRole("button", { name: `Edit "${options.newFact}"`, exact: true }).click();
  const form = item.getByRole("form", { name: "Edit fact" });
  const editor = {
    text: await form.getByRole("textbox", { name: "Fact text" }).inputValue(),
    kind: await form.getByRole("combobox", { name: "Fact kind" }).inputValue(),
  };
  await form.getByRole("textbox", { name: "Fact text" }).fill("not saved");
  await form.getByRole("button", { name: "Cancel", exact: true }).click();
  await item.locator(".text").waitFor();
  const editCancelled = await item.locator(".text").innerText();
  await item.getByRole("button", { name: `Edit "${options.newFact}"`, exact: true }).click();
  await form.getByRole("textbox", { name: "Fact text" }).fill(options.editedFact);
  // The list reloads (history shown, then hidden) while the form is open: what was typed stays.
  const historyBox = page.getByRole("checkbox", { name: "show history" });
  await historyBox.check();
  await page.locator("#facts li.divider").waitFor();
  await historyBox.uncheck();
  await page.locator("#facts li.divider").waitFor({ state: "detached" });
  const typedAfterReload = await form.getByRole("textbox", { name: "Fact text" }).inputValue();
  await form.getByRole("combobox", { name: "Fact kind" }).selectOption(options.editedKind);
  await form.getByRole("button", { name: "Save", exact: true }).click();
  const edited = await waitForFact(page, options.editedFact);
  report.factEdited = {
    editor,
    afterCancel: editCancelled,
    typedAfterReload,
    id: edited,
    status: await page.locator("#facts-status").innerText(),
    listed: await facts(page),
  };

  report.step = "delete a fact (cancel, then confirm)";
  const doomed = await waitForFact(page, options.dismiss);
  const deleteButton = `#facts li[data-id='${doomed}'] button.delete`;
  const deleteQuestion = await confirmVia(page, deleteButton, "cancel");
  const listedAfterCancel = await facts(page);
  await confirmVia(page, deleteButton, "ok");
  await page.waitForFunction(
    (gone) => !document.querySelector(`#facts li[data-id='${gone}']`),
    doomed,
  );
  report.factDeleted = {
    id: doomed,
    question: deleteQuestion,
    afterCancel: listedAfterCancel,
    afterConfirm: await facts(page),
    status: await page.locator("#facts-status").innerText(),
  };

  report.step = "show the facts' history";
  await page.getByRole("checkbox", { name: "show history" }).check();
  await page.locator("#facts li[data-status='dismissed']").first().waitFor();
  report.factHistory = await facts(page);
  await screenshot("memory-browser-facts.png");

  report.step = "hide the facts' history";
  await page.getByRole("checkbox", { name: "show history" }).uncheck();
  await page.waitForFunction(() => !document.querySelector("#facts li.past"));
  report.factsWithoutHistory = await facts(page);
});
