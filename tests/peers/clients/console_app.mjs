// Opens the gateway's console (GET /admin/console) in Debian's headless Chromium through
// playwright-core and reads what its playground shows for tools that link an MCP App, for
// tests/suite/apps.rs:
//
//   node console_app.mjs --url http://127.0.0.1:PORT --token TOKEN --tools a,b [--show a]
//
// Prints one JSON object: for each tool, the text of `#playground-app` (null when hidden); with
// --show, the app of that tool shown (the page's status and policy, the frame's sandbox, what ran
// inside it and what it could reach, a second load's status); console and page errors. It waits for elements, never for
// fixed times; it asserts nothing itself.
import { createRequire } from "node:module";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");

const opts = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) opts[argv[i].replace(/^--/, "")] = argv[i + 1];
const WAIT = { timeout: 30000 };

async function main() {
  const userDataDir = mkdtempSync(join(tmpdir(), "console-app-chromium-"));
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-sync"],
  });
  const result = { tools: {}, console_errors: [], page_errors: [] };
  try {
    const page = context.pages()[0] || (await context.newPage());
    page.on("console", (m) => m.type() === "error" && result.console_errors.push(m.text()));
    page.on("pageerror", (e) => result.page_errors.push(String(e)));
    await page.goto(opts.url.replace(/\/$/, "") + "/admin/console", { waitUntil: "load" });
    await page.waitForSelector("#token-form", { state: "visible", ...WAIT });
    await page.fill("#token", opts.token);
    await page.press("#token", "Enter");
    await page.waitForSelector('#page-servers[data-loaded="true"]', WAIT);
    await page.click('#nav a[data-page="playground"]');
    await page.waitForSelector('#page-playground[data-loaded="true"]', WAIT);
    for (const tool of opts.tools.split(",")) {
      await page.selectOption("#playground-tool", tool);
      await page.waitForFunction((t) => document.getElementById("playground-tool").value === t, tool, WAIT);
      const app = await page.$("#playground-app");
      const visible = app && (await app.isVisible());
      result.tools[tool] = visible ? (await app.innerText()).replace(/\s+/g, " ").trim() : null;
    }
    // Shows the app of opts.show: the frame's page, what ran in it, what it could reach.
    if (opts.show) {
      await page.selectOption("#playground-tool", opts.show);
      const [served] = await Promise.all([
        page.waitForResponse((r) => r.url().includes("/admin/console/app/"), WAIT),
        page.click("#playground-app-show"),
      ]);
      const frameElement = await page.waitForSelector("#playground-app-frame", WAIT);
      const frame = await frameElement.contentFrame();
      await frame.waitForFunction(() => document.body && document.body.dataset.ran === "yes", null, WAIT);
      result.app = {
        status: served.status(),
        policy: served.headers()["content-security-policy"] || null,
        sandbox: await frameElement.getAttribute("sandbox"),
        inside: await frame.evaluate(() => {
          let parentReadable;
          try {
            parentReadable = typeof parent.document.title === "string";
          } catch (e) {
            parentReadable = false;
          }
          let storage;
          try {
            storage = Object.keys(sessionStorage).length;
          } catch (e) {
            storage = "denied";
          }
          return { ran: document.body.dataset.ran, text: document.getElementById("app").textContent, origin: self.origin, parentReadable, storage };
        }),
        // A second load of the same page: each is served once.
        again: (await fetch(served.url())).status,
      };
    }
    result.frames = page.frames().length;
  } finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
  process.stdout.write(JSON.stringify(result) + "\n");
}

main().catch((error) => {
  process.stdout.write(JSON.stringify({ fatal: String(error && error.stack ? error.stack : error) }) + "\n");
  process.exit(1);
});
