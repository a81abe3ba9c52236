"use strict";
// What every driver here shares: Debian's Chromium with this machine's flags, a page that
// records what went wrong, and one JSON report on stdout (the assertions live in the Python
// tests). Requests to any host but 127.0.0.1 are blocked and listed: nothing leaves the
// machine.
//
//   const { main } = require("./common");
//   main(async ({ options, page, report, screenshot }) => { report.step = "..."; ... });
//
// The steps get the options (the JSON in argv[2]) and add what they saw to the report; a step
// that throws ends the run with report.error set and a "failure.png" screenshot. Exit status
// 0 when every step ran, 1 when one failed.

const path = require("node:path");
const { chromium } = require("playwright-core");

// Without the background-networking flags Chromium keeps trying to reach Google's hosts
// through a closed network.
const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

const LOCAL_PROTOCOLS = new Set(["data:", "blob:"]);

async function drive(options, steps) {
  const report = {
    error: null,
    step: null,
    consoleErrors: [],
    pageErrors: [],
    failedResponses: [],
    blockedRequests: [],
    screenshots: [],
  };
  const browser = await chromium.launch({
    executablePath: options.chromium,
    headless: true,
    args: CHROMIUM_FLAGS,
  });
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  await context.route("**/*", (route) => {
    const url = new URL(route.request().url());
    if (url.hostname !== "127.0.0.1" && !LOCAL_PROTOCOLS.has(url.protocol)) {
      report.blockedRequests.push(url.href);
      return route.abort();
    }
    return route.continue();
  });
  const page = await context.newPage();
  page.setDefaultTimeout(options.timeoutMs || 60000);
  page.on("console", (m) => m.type() === "error" && report.consoleErrors.push(m.text()));
  page.on("pageerror", (e) => report.pageErrors.push(String(e)));
  page.on("response", (r) => {
    if (r.status() >= 400) {
      report.failedResponses.push({ status: r.status(), method: r.request().method(), url: r.url() });
    }
  });
  const shot = (name) => path.join(options.screenshotDir, `${options.prefix || ""}${name}`);
  const screenshot = async (name, fullPage = true) => {
    await page.screenshot({ path: shot(name), fullPage });
    report.screenshots.push(shot(name));
  };
  try {
    await steps({ options, page, report, shot, screenshot });
    report.step = null;
  } catch (error) {
    report.error = String(error && error.stack ? error.stack : error);
    await screenshot("failure.png").catch(() => {});
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(report));
  process.exitCode = report.error ? 1 : 0;
}

function main(steps) {
  drive(JSON.parse(process.argv[2]), steps).catch((error) => {
    process.stdout.write(JSON.stringify({ error: String(error && error.stack ? error.stack : error) }));
    process.exitCode = 1;
  });
}

module.exports = { main, CHROMIUM_FLAGS };
