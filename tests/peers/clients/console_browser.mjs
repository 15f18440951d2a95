// Drives the gateway's operators' console (GET /admin/console) in Debian's headless Chromium
// through playwright-core (never a browser download), for tests/suite/console_browser.rs:
//
//   node console_browser.mjs --url http://127.0.0.1:PORT --token TOKEN --server demo
//        --dead dead --pinned-server words --pinned-tool lookup --tool manga_search
//        --shots DIR [--docs-shot FILE] [--surface-server NAME]
//
// It prints one JSON object on stdout: what every page showed (rows, texts), what the browser
// saw (console errors, page errors, failed requests, HTTP errors), axe-core's serious and
// critical violations per page, each step of the flow (breaker forced open then closed, a
// pinned change approved, a playground call with a validation error, then a success) with the
// admin API's own view after it, and what a page without the token shows and can do. It
// asserts nothing itself: the Rust test judges. It waits for elements, never for fixed times.
import { createRequire } from "node:module";
import { mkdtempSync, readFileSync, rmSync, mkdirSync, copyFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";

const require = createRequire(import.meta.url);
const { chromium } = require("playwright-core");
const axeSource = readFileSync(require.resolve("axe-core/axe.min.js"), "utf8");

function options(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith("--")) throw new Error("unexpected argument " + argv[i]);
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const key of ["url", "token", "server", "dead", "pinned-server", "pinned-tool", "tool", "shots"]) {
    if (!out[key]) throw new Error("missing --" + key);
  }
  return out;
}

const opts = options(process.argv.slice(2));
const base = opts.url.replace(/\/$/, "");
const consoleUrl = base + "/admin/console";
const WAIT = { timeout: 30000 };
const PAGES = ["servers", "catalogue", "approvals", "calls", "playground"];

// The admin API seen from outside the browser (Node's fetch, the admin token).
async function admin(path) {
  const response = await fetch(base + path, { headers: { Authorization: "Bearer " + opts.token } });
  return { status: response.status, body: await response.json() };
}

// Everything a page reports that the test must see: console errors, uncaught exceptions,
// failed requests and HTTP answers of 400 or more, each tagged with the phase it happened in.
function watch(page, log) {
  const seen = { phase: "load" };
  page.on("console", (message) => {
    if (message.type() === "error") log.console_errors.push({ phase: seen.phase, text: message.text() });
  });
  page.on("pageerror", (error) => log.page_errors.push({ phase: seen.phase, text: String(error) }));
  page.on("requestfailed", (request) =>
    log.failed_requests.push({ phase: seen.phase, url: request.url(), error: request.failure() && request.failure().errorText }),
  );
  page.on("response", (response) => {
    log.requests.push({ phase: seen.phase, method: response.request().method(), url: response.url().replace(base, ""), status: response.status() });
    if (response.status() >= 400) {
      log.http_errors.push({ phase: seen.phase, url: response.url().replace(base, ""), status: response.status() });
    }
  });
  return seen;
}

async function axe(page) {
  await page.evaluate(axeSource + "\n;0");
  const results = await page.evaluate(() => window.axe.run(document, { resultTypes: ["violations"] }));
  return results.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => ({ id: v.id, impact: v.impact, help: v.help, targets: v.nodes.map((n) => n.target.join(" ")).slice(0, 5) }));
}

async function openPage(page, name) {
  await page.click('#nav a[data-page="' + name + '"]');
  await page.waitForSelector("#page-" + name + '[data-loaded="true"]', WAIT);
}

async function rowTexts(page, selector) {
  return page.$$eval(selector, (rows) => rows.map((row) => row.innerText.replace(/\s+/g, " ").trim()));
}

async function breakerCell(page, server) {
  return page.getAttribute('#servers-table tr[data-server="' + server + '"] td.breaker-state', "data-state");
}

async function main() {
  const userDataDir = mkdtempSync(join(tmpdir(), "console-chromium-"));
  mkdirSync(opts.shots, { recursive: true });
  const context = await chromium.launchPersistentContext(userDataDir, {
    executablePath: "/usr/bin/chromium",
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    viewport: { width: 1400, height: 900 },
  });
  const result = { pages: {}, flow: {}, no_token: {} };
  try {
    // ------------------------------------------------------------ every page, with the token
    const log = { console_errors: [], page_errors: [], failed_requests: [], http_errors: [], requests: [] };
    const page = context.pages()[0] || (await context.newPage());
    const seen = watch(page, log);
    const shell = await page.goto(consoleUrl, { waitUntil: "load" });
    result.shell = { status: shell.status(), csp: shell.headers()["content-security-policy"] || null };
    await page.waitForSelector("#token-form", { state: "visible", ...WAIT });
    await page.fill("#token", opts.token);
    await page.press("#token", "Enter");
    await page.waitForSelector('#page-servers[data-loaded="true"]', WAIT);
    result.token_stored_in = await page.evaluate(() => ({
      session: Object.keys(sessionStorage),
      local: Object.keys(localStorage),
      cookies: document.cookie,
    }));
    for (const name of PAGES) {
      seen.phase = "page:" + name;
      await openPage(page, name);
      // Each page shows its data before it is judged.
      if (name === "servers") await page.waitForSelector('#servers-table tr[data-server="' + opts.dead + '"]', WAIT);
      if (name === "catalogue") await page.waitForSelector('#catalogue-table tr[data-tool="' + opts.tool + '"]', WAIT);
      // The federated resources and prompts, when the test named a server that offers them.
      if (name === "catalogue" && opts["surface-server"]) {
        await page.waitForSelector('#surface-table tr[data-server="' + opts["surface-server"] + '"]', WAIT);
      }
      if (name === "approvals") await page.waitForSelector("#pending-list article.pending", WAIT);
      if (name === "calls") await page.waitForSelector("#calls-table tbody tr td", WAIT);
      if (name === "playground") await page.waitForSelector("#playground-fields .field", WAIT);
      const info = {
        title: await page.title(),
        heading: await page.textContent("#" + name + "-title"),
        visible: await page.isVisible("#page-" + name),
        token_form_visible: await page.isVisible("#token-page"),
        axe: await axe(page),
      };
      if (name === "servers") {
        info.rows = await rowTexts(page, "#servers-table tbody tr");
        info.figures = await page.innerText("#gateway-figures");
        info.endpoints = await rowTexts(page, "#endpoints-table tbody tr");
        info.hooks = await rowTexts(page, "#hooks-table tbody tr");
      }
      if (name === "catalogue") {
        info.rows = await rowTexts(page, "#catalogue-table tbody tr");
        await page.fill("#catalogue-search", opts.tool);
        info.search = { query: opts.tool, rows: await rowTexts(page, "#catalogue-table tbody tr") };
        await page.fill("#catalogue-search", "");
        info.hidden = await page.innerText("#catalogue-hidden");
        info.collisions = await page.innerText("#collisions");
        await page.waitForFunction(() => !document.getElementById("drift").innerText.includes("Comparing"), null, WAIT);
        info.drift = await page.innerText("#drift");
        info.surface = {
          summary: await page.innerText("#surface-summary"),
          servers: await rowTexts(page, "#surface-table tbody tr"),
          collisions: await rowTexts(page, "#surface-collisions tbody tr"),
          prompts: await rowTexts(page, "#surface-prompts tbody tr"),
          resources: await rowTexts(page, "#surface-resources tbody tr"),
          templates: await rowTexts(page, "#surface-templates tbody tr"),
        };
      }
      if (name === "approvals") {
        info.pending = await page.$$eval("#pending-list article.pending", (items) =>
          items.map((a) => ({
            server: a.dataset.server,
            tool: a.dataset.tool,
            deleted: [...a.querySelectorAll(".diff del")].map((d) => d.textContent),
            inserted: [...a.querySelectorAll(".diff ins")].map((d) => d.textContent),
            text: a.innerText,
          })),
        );
      }
      if (name === "calls") info.rows = await rowTexts(page, "#calls-table tbody tr");
      if (name === "playground") {
        info.tools = await page.$$eval("#playground-tool option", (o) => o.map((x) => x.value));
      }
      await page.screenshot({ path: join(opts.shots, name + ".png"), fullPage: true });
      result.pages[name] = info;
    }
    // The Servers page, for the README.
    if (opts["docs-shot"]) {
      seen.phase = "docs-shot";
      await openPage(page, "servers");
      await page.waitForSelector('#servers-table tr[data-server="' + opts.dead + '"]', WAIT);
      mkdirSync(dirname(opts["docs-shot"]), { recursive: true });
      await page.screenshot({ path: join(opts.shots, "servers-docs.png") });
      copyFileSync(join(opts.shots, "servers-docs.png"), opts["docs-shot"]);
    }

    // ------------------------------------------------------------ the flow
    // 1. The demo server's breaker forced open, then closed, from the Servers page.
    seen.phase = "flow:breaker";
    await openPage(page, "servers");
    const row = '#servers-table tr[data-server="' + opts.server + '"]';
    result.flow.breaker_before = { ui: await breakerCell(page, opts.server), api: (await admin("/admin/breakers")).body[opts.server] };
    await page.click(row + ' button[data-action="open"]');
    await page.waitForSelector(row + ' td.breaker-state[data-state="open"]', WAIT);
    result.flow.after_open = {
      ui: await breakerCell(page, opts.server),
      cell: await page.textContent(row + " td.breaker-state"),
      status: await page.textContent("#status"),
      api: (await admin("/admin/breakers")).body[opts.server],
    };
    await page.click(row + ' button[data-action="close"]');
    await page.waitForSelector(row + ' td.breaker-state[data-state="closed"]', WAIT);
    result.flow.after_close = {
      ui: await breakerCell(page, opts.server),
      status: await page.textContent("#status"),
      api: (await admin("/admin/breakers")).body[opts.server],
    };

    // 1b. The configuration reloaded from the Servers page (the file is unchanged: nothing applies).
    seen.phase = "flow:reload";
    result.flow.config_before = (await admin("/admin/config/reload")).body;
    await page.click("#reload-config");
    await page.waitForFunction(() => /last reload/.test(document.getElementById("config-status").textContent), null, WAIT);
    result.flow.after_reload = {
      status: await page.textContent("#status"),
      config: await page.textContent("#config-status"),
      api: (await admin("/admin/config/reload")).body,
    };

    // 2. The pinned change approved from the Approvals page.
    seen.phase = "flow:approve";
    await openPage(page, "approvals");
    const article = '#pending-list article[data-server="' + opts["pinned-server"] + '"][data-tool="' + opts["pinned-tool"] + '"]';
    await page.waitForSelector(article, WAIT);
    result.flow.pins_before = (await admin("/admin/registry/pins")).body;
    await page.click(article + ' button[data-action="approve"]');
    await page.waitForSelector(article, { state: "detached", ...WAIT });
    result.flow.after_approve = {
      status: await page.textContent("#status"),
      list: await page.innerText("#pending-list"),
      api: (await admin("/admin/registry/pins")).body,
    };

    // 3. The playground: a validation error shown, then a success.
    seen.phase = "flow:playground";
    await openPage(page, "playground");
    await page.selectOption("#playground-tool", opts.tool);
    await page.waitForSelector("#playground-fields .field", WAIT);
    result.flow.form = await page.$$eval("#playground-fields input, #playground-fields select, #playground-fields textarea", (controls) =>
      controls.map((c) => ({
        name: c.name,
        tag: c.tagName.toLowerCase(),
        type: c.getAttribute("data-type"),
        value: c.value,
        required: c.required,
        label: document.querySelector('label[for="' + c.id + '"]').innerText,
        options: c.tagName === "SELECT" ? [...c.options].map((o) => o.text) : null,
      })),
    );
    const answers = [];
    // Clicks Call and keeps the gateway's answer to the page's POST /admin/playground.
    const call = async () => {
      const [response] = await Promise.all([
        page.waitForResponse((r) => r.url().endsWith("/admin/playground") && r.request().method() === "POST", WAIT),
        page.click("#playground-call"),
      ]);
      answers.push({ status: response.status(), body: await response.json().catch(() => null) });
    };
    await page.fill('#playground-fields [name="query"]', "naruto");
    await page.fill('#playground-fields [name="max_results"]', "99");
    await call();
    await page.waitForSelector('#outcome-body[data-outcome="error"]', WAIT);
    result.flow.playground_error = {
      shown: await page.innerText("#outcome-body"),
      violations: await page.$$eval('#outcome-body ul[aria-label="Violations"] li', (l) => l.map((x) => x.innerText)),
    };
    await page.fill('#playground-fields [name="max_results"]', "3");
    await call();
    await page.waitForSelector('#outcome-body[data-outcome="result"]', WAIT);
    result.flow.playground_result = { shown: await page.innerText("#outcome-body") };
    // Through a chosen endpoint: a tool outside its selection is unknown there.
    if (opts.endpoint) {
      result.flow.endpoints_offered = await page.$$eval("#playground-endpoint option", (o) => o.map((x) => x.value));
      await page.selectOption("#playground-endpoint", opts.endpoint);
      await page.selectOption("#playground-tool", opts["outside-tool"]);
      await call();
      await page.waitForSelector('#outcome-body[data-outcome="error"]', WAIT);
      result.flow.playground_outside = { shown: await page.innerText("#outcome-body") };
      await page.selectOption("#playground-endpoint", "");
    }
    result.flow.playground_answers = answers;
    await page.screenshot({ path: join(opts.shots, "playground-result.png"), fullPage: true });

    // Live figures: a call made outside the browser shows up on Recent calls without a reload
    // (the window's marker survives); a hidden tab pauses the refresh, a visible one resumes it.
    seen.phase = "live";
    await openPage(page, "calls");
    await page.evaluate(() => (window.__sameDocument = true));
    const liveCall = await fetch(base + "/mcp", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: opts["live-tool"] || "price_lookup", arguments: { manga_id: "MNG-00000001" } } }),
    });
    result.live = { call_status: liveCall.status };
    await page.waitForFunction((tool) => document.querySelector("#calls-table tbody").innerText.includes(tool), opts["live-tool"] || "price_lookup", WAIT);
    result.live.same_document = await page.evaluate(() => window.__sameDocument === true);
    result.live.indicator_visible_tab = await page.textContent("#live");
    await page.evaluate(() => {
      Object.defineProperty(document, "hidden", { configurable: true, get: () => true });
      document.dispatchEvent(new Event("visibilitychange"));
    });
    result.live.indicator_hidden_tab = await page.textContent("#live");
    await page.evaluate(() => {
      Object.defineProperty(document, "hidden", { configurable: true, get: () => false });
      document.dispatchEvent(new Event("visibilitychange"));
    });
    result.live.indicator_visible_again = await page.textContent("#live");

    // Keyboard: the page links are reachable with Tab and move with the arrow keys.
    seen.phase = "keyboard";
    await page.focus('#nav a[data-page="servers"]');
    await page.keyboard.press("ArrowRight");
    result.keyboard = { focused_after_arrow: await page.evaluate(() => document.activeElement.getAttribute("data-page")) };
    await page.keyboard.press("Enter");
    await page.waitForSelector('#page-catalogue[data-loaded="true"]', WAIT);
    result.keyboard.opened = await page.evaluate(() => location.hash);
    // A live refresh keeps the keyboard focus on the breaker button it was on.
    await openPage(page, "servers");
    await page.focus(row + ' button[data-action="close"]');
    const renders = await page.getAttribute("#servers-table", "data-renders");
    await page.waitForFunction((n) => +document.getElementById("servers-table").getAttribute("data-renders") > n, +renders, WAIT);
    result.keyboard.focus_after_refresh = await page.evaluate(() => {
      const a = document.activeElement;
      return a && a.closest("tr") ? a.closest("tr").getAttribute("data-server") + "/" + a.getAttribute("data-action") : a && a.tagName;
    });
    result.with_token = log;

    // ------------------------------------------------------------ without the token
    const bare = await context.newPage();
    const bareLog = { console_errors: [], page_errors: [], failed_requests: [], http_errors: [], requests: [] };
    const bareSeen = watch(bare, bareLog);
    await bare.goto(consoleUrl + "#servers", { waitUntil: "load" });
    await bare.waitForSelector("#token-form", { state: "visible", ...WAIT });
    const shows = async () => ({
      token_form_visible: await bare.isVisible("#token-page"),
      pages_visible: await bare.$$eval(".page", (pages) => pages.filter((p) => !p.hidden).map((p) => p.id)),
      data_rows: await bare.$$eval("tbody tr, article.pending, #gateway-figures div", (r) => r.length),
      // Names only the gateway's data holds: none may be on a page without the token.
      mentions: await bare.innerText("body").then((body) =>
        [opts.server, opts.dead, opts.tool, opts["pinned-tool"]].filter((name) => body.includes(name)),
      ),
    });
    result.no_token.initial = await shows();
    result.no_token.requests_before_token = bareLog.requests.filter((r) => r.url.startsWith("/admin/") && !r.url.startsWith("/admin/console")).length;
    // A data request and an action sent from the page without a token.
    bareSeen.phase = "no-token:fetch";
    result.no_token.actions = await bare.evaluate(async (server) => {
      const read = await fetch("/admin/breakers");
      const open = await fetch("/admin/breakers/" + server + "/open", { method: "POST" });
      const approve = await fetch("/admin/registry/approve", { method: "POST", headers: { "Content-Type": "application/json" }, body: '{"all": true}' });
      return { read: read.status, open: open.status, approve: approve.status };
    }, opts.server);
    // A wrong token: refused, back on the token form with a message, nothing shown.
    bareSeen.phase = "no-token:wrong";
    await bare.fill("#token", "not-the-admin-token");
    await bare.press("#token", "Enter");
    await bare.waitForFunction(() => document.getElementById("token-error").textContent.includes("401"), null, WAIT);
    result.no_token.wrong_token = { message: await bare.textContent("#token-error"), ...(await shows()) };
    result.no_token.breaker_after = (await admin("/admin/breakers")).body[opts.server];
    await bare.screenshot({ path: join(opts.shots, "no-token.png"), fullPage: true });
    result.no_token.axe = await axe(bare);
    result.without_token = bareLog;
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
