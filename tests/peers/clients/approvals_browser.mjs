// Drives the approval page of a caller's user (GET /approvals/{id}#secret) and the console's
// Approvals page in Debian's headless Chromium through playwright-core, for
// tests/suite/approvals_browser.rs:
//
//   node approvals_browser.mjs --url http://127.0.0.1:PORT --token TOKEN --link LINK
//        --operator-id ID --shots DIR
//
// The person: opens LINK, reads the facts, approves. The operator: signs in to the console,
// opens Approvals, reads the waiting call ID, approves it. Prints one JSON object: what each
// page showed, the address after the page read its secret, axe-core's serious and critical
// violations, console and page errors. It asserts nothing itself; it waits for elements,
// never for fixed times.
import { createRequire } from "node:module";
import { mkdtempSync, readFileSync, rmSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

const opts = {};
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i += 2) opts[argv[i].replace(/^--/, "")] = argv[i + 1];
for (const key of ["url", "token", "link", "operator-id", "shots"]) {
  if (!opts[key]) throw new Error("missing --" + key);
}
const base = opts.url.replace(/\/$/, "");
const WAIT = { timeout: 30000 };

async function axe(page) {
  await page.evaluate(axeSource + "\n;0");
  const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  return results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help }));
}

function watch(page, log) {
  page.on("console", (m) => { if (m.type() === "error") log.console_errors.push(m.text()); });
  page.on("pageerror", (e) => log.page_errors.push(String(e)));
  page.on("request", (r) => log.request_urls.push(r.url()));
}

async function main() {
  const userDataDir = mkdtempSync(join(tmpdir(), "approvals-chromium-"));
  mkdirSync(opts.shots, { recursive: true });
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    viewport: { width: 1200, height: 900 },
  });
  const result = { user: {}, operator: {} };
  try {
    // ------------------------------------------------------------ the person, by the link
    const log = { console_errors: [], page_errors: [], request_urls: [] };
    const page = context.pages()[0] || (await context.newPage());
    watch(page, log);
    const shell = await page.goto(opts.link, { waitUntil: "load" });
    result.user.status = shell.status();
    result.user.csp = shell.headers()["content-security-policy"] || null;
    await page.waitForSelector("#facts:not([hidden])", WAIT);
    result.user.address_after_load = page.url();
    result.user.facts = {
      tool: await page.textContent("#tool"),
      server: await page.textContent("#server"),
      subject: await page.textContent("#subject"),
      arguments: JSON.parse(await page.textContent("#arguments")),
      digest: await page.textContent("#digest"),
    };
    result.user.axe = await axe(page);
    await page.screenshot({ path: join(opts.shots, "approval-page.png"), fullPage: true });
    await page.click("#approve");
    await page.waitForSelector('#facts[data-decided="approve"]', WAIT);
    result.user.status_text = await page.textContent("#status");
    // Opened again (a fresh load, not a same-document fragment change): the link is spent.
    await page.goto("about:blank");
    await page.goto(opts.link, { waitUntil: "load" });
    await page.waitForFunction(() => document.getElementById("status").classList.contains("bad"), null, WAIT);
    result.user.reopened = { status_text: await page.textContent("#status"), facts_hidden: await page.isHidden("#facts") };
    result.user.log = log;

    // ------------------------------------------------------------ the operator, on the console
    const olog = { console_errors: [], page_errors: [], request_urls: [] };
    const console_ = await context.newPage();
    watch(console_, olog);
    await console_.goto(base + "/admin/console", { waitUntil: "load" });
    await console_.waitForSelector("#token-form", { state: "visible", ...WAIT });
    await console_.fill("#token", opts.token);
    await console_.press("#token", "Enter");
    await console_.waitForSelector('#page-servers[data-loaded="true"]', WAIT);
    await console_.click('#nav a[data-page="approvals"]');
    const item = '#call-approvals-list article[data-approval="' + opts["operator-id"] + '"]';
    await console_.waitForSelector(item, WAIT);
    result.operator.badge = await console_.textContent("#pending-badge");
    result.operator.heading = await console_.textContent(item + " h3");
    result.operator.arguments = JSON.parse(await console_.textContent(item + " pre.arguments"));
    result.operator.text = (await console_.innerText(item)).replace(/\s+/g, " ");
    result.operator.axe = await axe(console_);
    await console_.screenshot({ path: join(opts.shots, "console-approvals.png"), fullPage: true });
    await console_.click(item + ' button[data-action="approve-call"]');
    await console_.waitForSelector(item + '[data-status="approved"]', WAIT);
    result.operator.after = (await console_.innerText(item)).replace(/\s+/g, " ");
    result.operator.status_text = await console_.textContent("#status");
    result.operator.log = olog;
  } catch (error) {
    result.fatal = String(error && error.stack ? error.stack : error);
  } finally {
    await context.close();
    rmSync(userDataDir, { recursive: true, force: true });
  }
  console.log(JSON.stringify(result));
}

main();
