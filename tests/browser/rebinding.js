"use strict";
// Web pages of other sites against a memory_chain server on 127.0.0.1, in headless Chromium,
// next to the server's own memory browser. Prints one JSON report; the assertions live in
// tests/api/test_web_guard_browser.py.
//
//   node rebinding.js '{"chromium": "...", "port": 8000, "rebindName": "rebind.test",
//     "attacks": [["GET", "/v1/users/me/export"], ["POST", "/v1/facts", {...}], ...],
//     "crossPages": ["http://localhost:9000/", "http://cross.test:9000/"],
//     "newFact": "...", "screenshotDir": "/tmp/x"}'
//
// Chromium resolves rebindName (and cross.test) to 127.0.0.1 (--host-resolver-rules), as a
// DNS rebinding attacker's name resolves once it is re-pointed. Steps:
// 1. DNS rebinding: the attacker's page at http://<rebindName>:<port>/. Its first load is
//    answered by page.route with the attacker's HTML, standing in for the attacker's server
//    before the name is re-pointed; every request the page then makes goes to the network,
//    so to the memory server, from a page that is same-origin with it for the browser. The
//    page runs every attack with fetch and lists what it got (status and body).
// 2. The memory browser at http://127.0.0.1:<port>/ui/ (then http://localhost:<port>/ui/), in
//    the same browser: it lists the user's conversations and facts, and adds a fact.
// 3. Cross-origin pages (another port, another name), served by the test's own HTTP server
//    in a context without request interception (Playwright answers CORS preflights itself
//    when it intercepts): they try to read and write through http://127.0.0.1:<port>.
// Every response of the network (also those the pages could not read) is listed with its
// status under "network".

const path = require("node:path");
const { chromium } = require("playwright-core");
const { CHROMIUM_FLAGS } = require("./common");

// Chromium's Local Network Access asks the user before a page from a public address reaches
// a loopback one, and in headless mode refuses: with it the attacker's page (its first load
// answered by page.route, so from no local address) would not reach the server at all.
// It is off here: the server must refuse by itself (Firefox and Safari have no such check,
// older Chromium neither, and a user may allow it).
const LNA = "LocalNetworkAccessChecks";

function attackerPage(attacks) {
  // Runs in the attacker's page: each attack as fetch, same-origin for the browser.
  const script = `
    (async () => {
      const results = [];
      for (const [method, target, body] of ${JSON.stringify(attacks)}) {
        const headers = { Accept: "application/json, text/event-stream" };
        if (body !== undefined) headers["Content-Type"] = "application/json";
        try {
          const response = await fetch(target, {
            method, headers, body: body === undefined ? undefined : JSON.stringify(body),
          });
          results.push({ method, path: target, status: response.status,
                         body: (await response.text()).slice(0, 400) });
        } catch (error) {
          results.push({ method, path: target, error: String(error) });
        }
      }
      window.attackResults = results;
      document.title = "done";
    })();`;
  return `<!doctype html><html><head><title>a page</title></head><body><p>Nothing to see.</p><script>${script}</script></body></html>`;
}

function listen(page, network) {
  page.on("response", (r) =>
    network.push({ page: page.url(), method: r.request().method(), url: r.url(), status: r.status() }),
  );
  page.on("requestfailed", (r) =>
    network.push({ page: page.url(), method: r.method(), url: r.url(), failure: r.failure()?.errorText }),
  );
}

async function memoryBrowser(context, base, newFact, network) {
  const page = await context.newPage();
  listen(page, network);
  await page.goto(`${base}/ui/`);
  await page.locator("#facts li[data-id]").first().waitFor();
  await page.locator("#conversations li[data-id]").first().waitFor();
  const seen = {
    whoami: await page.locator("#whoami").innerText(),
    conversations: await page.locator("#conversations li[data-id]").evaluateAll((items) =>
      items.map((li) => li.dataset.id),
    ),
    facts: await page.locator("#facts li .text").allInnerTexts(),
    errorHidden: await page.locator("#error").isHidden(),
  };
  if (newFact) {
    await page.locator("#fact-text").fill(newFact);
    await page.getByRole("button", { name: "Add fact", exact: true }).click();
    await page.waitForFunction(
      (wanted) => Array.from(document.querySelectorAll("#facts li .text")).some((t) => t.textContent === wanted),
      newFact,
    );
    seen.factsAfterAdding = await page.locator("#facts li .text").allInnerTexts();
  }
  await page.close();
  return seen;
}

async function run(options, report) {
  const network = (report.network = []);
  const pageErrors = (report.pageErrors = []);
  const resolverRules = [`MAP ${options.rebindName} 127.0.0.1`, "MAP cross.test 127.0.0.1"].join(", ");
  const browser = await chromium.launch({
    executablePath: options.chromium,
    headless: true,
    args: [...CHROMIUM_FLAGS, `--host-resolver-rules=${resolverRules}`, `--disable-features=${LNA}`],
  });
  try {
    const base = `http://127.0.0.1:${options.port}`;
    const context = await browser.newContext();
    context.setDefaultTimeout(options.timeoutMs || 60000);

    report.step = "DNS rebinding";
    const attacker = await context.newPage();
    listen(attacker, network);
    attacker.on("pageerror", (e) => pageErrors.push(String(e)));
    const attackerUrl = `http://${options.rebindName}:${options.port}/`;
    await attacker.route(attackerUrl, (route) =>
      route.fulfill({ status: 200, contentType: "text/html", body: attackerPage(options.attacks) }),
    );
    await attacker.goto(attackerUrl);
    await attacker.waitForFunction(() => document.title === "done");
    report.rebinding = {
      origin: await attacker.evaluate(() => window.location.origin),
      results: await attacker.evaluate(() => window.attackResults),
    };
    await attacker.screenshot({ path: path.join(options.screenshotDir, "rebinding.png") });

    report.step = "the memory browser on 127.0.0.1";
    report.memoryBrowser = await memoryBrowser(context, base, options.newFact, network);
    report.step = "the memory browser on localhost";
    report.memoryBrowserLocalhost = await memoryBrowser(
      context, `http://localhost:${options.port}`, null, network,
    );

    report.step = "cross-origin pages";
    const plain = await browser.newContext(); // no interception: Chromium's own CORS
    plain.setDefaultTimeout(options.timeoutMs || 60000);
    report.crossOrigin = [];
    for (const url of options.crossPages) {
      const page = await plain.newPage();
      listen(page, network);
      page.on("pageerror", (e) => pageErrors.push(String(e)));
      await page.goto(url);
      await page.waitForFunction(() => document.title === "done");
      report.crossOrigin.push({ url, results: await page.evaluate(() => window.attackResults) });
      await page.close();
    }
    report.step = null;
  } finally {
    await browser.close();
  }
}

const report = { error: null, step: null };
run(JSON.parse(process.argv[2]), report)
  .catch((error) => {
    report.error = String(error && error.stack ? error.stack : error);
  })
  .finally(() => {
    process.stdout.write(JSON.stringify(report));
    process.exitCode = report.error ? 1 : 0;
  });
