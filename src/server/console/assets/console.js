// mcp-gateway console: the operators' pages, served by the gateway itself under a strict CSP
// (no inline script or style, no external asset, no framework, no build step). It holds no data
// of its own: every figure comes from the admin JSON endpoints, fetched with
// `Authorization: Bearer <admin token>`; the token lives in this tab's sessionStorage only, and
// no cookie is ever set, so a foreign page has no ambient credential to ride. A 401 forgets the
// token and returns to the token form.
"use strict";

(function () {
  const TOKEN_KEY = "mcp-gateway-console-token";
  const PAGES = ["servers", "catalogue", "approvals", "calls", "playground"];
  // Pages whose figures are live: refreshed every REFRESH_MS while the tab is visible.
  const LIVE = new Set(["servers", "calls", "approvals"]);
  const REFRESH_MS = 2000;

  const $ = (id) => document.getElementById(id);
  let current = null;
  let timer = null;
  const loading = new Map();
  let catalogue = { tools: [], schemas: null };

  // ---------------------------------------------------------------- small DOM helpers
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children.flat()) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }
  const text = (value) => (value === null || value === undefined || value === "" ? "—" : String(value));
  const fixed = (value, digits) => (typeof value === "number" && isFinite(value) ? value.toFixed(digits) : "—");
  const percent = (value) => (typeof value === "number" && isFinite(value) ? (value * 100).toFixed(1) + " %" : "—");
  const ms = (value) => (typeof value === "number" && isFinite(value) ? value.toFixed(1) + " ms" : "—");
  const mib = (value) => (typeof value === "number" && isFinite(value) ? (value / 1048576).toFixed(1) + " MiB" : "—");
  const shortHash = (hash) => (typeof hash === "string" && hash.length > 16 ? hash.slice(0, 12) + "…" : text(hash));
  function when(value) {
    if (!value) return "—";
    const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
    return isNaN(date.getTime()) ? String(value) : date.toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
  }
  function badge(label, kind) {
    return el("span", { class: "badge" + (kind ? " " + kind : "") , text: label });
  }
  function stateBadge(state) {
    const kind = { closed: "ok", ready: "ok", open: "bad", failed: "bad", half_open: "warn", connecting: "warn" }[state];
    return badge(text(state), kind);
  }
  function replaceRows(tbody, rows, columns, emptyText) {
    tbody.replaceChildren(
      ...(rows.length ? rows : [el("tr", {}, el("td", { colspan: columns, class: "empty", text: emptyText }))]),
    );
  }
  function say(message, bad) {
    const status = $("status");
    status.textContent = message || "";
    status.classList.toggle("bad", !!bad);
  }

  // ---------------------------------------------------------------- the admin API
  class Unauthorized extends Error {}

  function token() {
    return sessionStorage.getItem(TOKEN_KEY);
  }

  // Every request of the console: bearer token, JSON; a 401 signs out.
  async function api(path, options) {
    const headers = { Authorization: "Bearer " + (token() || ""), Accept: "application/json" };
    const init = { method: "GET", headers, cache: "no-store", credentials: "omit" };
    if (options && options.body !== undefined) {
      init.method = "POST";
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(options.body);
    } else if (options && options.method) {
      init.method = options.method;
    }
    const response = await fetch(path, init);
    // Only the admin guard's 401 means the token is wrong (`/tools` answers 401 to a caller
    // without an identity under [auth]: that is no reason to sign out).
    if (response.status === 401 && path.startsWith("/admin/")) {
      throw new Unauthorized("the gateway refused the admin token (401)");
    }
    let body = null;
    const type = response.headers.get("content-type") || "";
    if (type.includes("json")) body = await response.json();
    else body = { error: (await response.text()).slice(0, 300) };
    return { ok: response.ok, status: response.status, body };
  }

  async function apiJson(path) {
    const answer = await api(path);
    if (!answer.ok) throw new Error(path + " answered " + answer.status + ": " + ((answer.body && answer.body.error) || ""));
    return answer.body;
  }

  function failed(error) {
    if (error instanceof Unauthorized) {
      signOut(error.message + ": enter the admin token again.");
      return;
    }
    say(String(error.message || error), true);
  }

  // ---------------------------------------------------------------- token and navigation
  function signedIn() {
    return !!token();
  }

  function signOut(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    stopRefresh();
    for (const page of PAGES) clearPage(page);
    show(null);
    $("token-error").textContent = message || "";
    say("");
    $("token").value = "";
    $("token").focus();
  }

  // Removes every figure a page shows (on sign-out: no data stays on screen without a token).
  function clearPage(page) {
    const section = $("page-" + page);
    section.removeAttribute("data-loaded");
    for (const tbody of section.querySelectorAll("tbody")) tbody.replaceChildren();
    for (const id of ["gateway-figures", "collisions", "drift", "pending-list", "playground-fields"]) {
      if (section.contains($(id))) $(id).replaceChildren();
    }
    if (page === "approvals") $("pins-summary").textContent = "";
    if (page === "calls") $("calls-summary").textContent = "";
    if (page === "playground") {
      $("playground-tool").replaceChildren();
      $("playground-description").textContent = "";
      renderApp(null);
      $("outcome-body").replaceChildren(el("p", { class: "hint", text: "No call yet." }));
    }
    catalogue = { tools: [], schemas: null };
    if (page === "catalogue") {
      $("catalogue-count").textContent = "";
      $("catalogue-hidden").textContent = "";
    }
    $("pending-badge").hidden = true;
  }

  function pageFromHash() {
    const name = location.hash.replace(/^#/, "");
    return PAGES.includes(name) ? name : "servers";
  }

  // Shows `page` (null: the token form only).
  function show(page) {
    current = page;
    $("token-page").hidden = page !== null;
    $("nav").hidden = page === null;
    $("session").hidden = page === null;
    for (const name of PAGES) {
      $("page-" + name).hidden = name !== page;
      const link = document.querySelector('a[data-page="' + name + '"]');
      if (name === page) link.setAttribute("aria-current", "page");
      else link.removeAttribute("aria-current");
    }
    if (page) {
      document.title = $(page + "-title").textContent + " · mcp-gateway console";
    } else {
      document.title = "mcp-gateway console";
    }
  }

  async function open(page) {
    if (!signedIn()) {
      show(null);
      return;
    }
    show(page);
    say("");
    await load(page, true);
    scheduleRefresh();
  }

  const loaders = { servers: loadServers, catalogue: loadCatalogue, approvals: loadApprovals, calls: loadCalls, playground: loadPlayground };

  // Loads `page`; a load asked for while one of the same page is under way runs right after it.
  async function load(page, first) {
    if (loading.has(page)) {
      loading.get(page).again = true;
      return;
    }
    const state = { again: false };
    loading.set(page, state);
    try {
      do {
        state.again = false;
        await loaders[page](first);
        first = false;
      } while (state.again && signedIn());
      if (current === page && signedIn()) $("page-" + page).setAttribute("data-loaded", "true");
    } catch (error) {
      failed(error);
    } finally {
      loading.delete(page);
    }
  }

  // ---------------------------------------------------------------- live refresh
  function stopRefresh() {
    if (timer !== null) clearTimeout(timer);
    timer = null;
  }

  function scheduleRefresh() {
    stopRefresh();
    const live = LIVE.has(current) && signedIn();
    const paused = document.hidden || !live;
    $("live").textContent = !live ? "loaded when opened" : paused ? "paused" : "live · every " + REFRESH_MS / 1000 + " s";
    $("live").classList.toggle("paused", paused);
    if (paused) return;
    timer = setTimeout(async () => {
      timer = null;
      if (current && !document.hidden && signedIn()) await load(current, false);
      if (signedIn()) scheduleRefresh();
    }, REFRESH_MS);
  }

  // ---------------------------------------------------------------- Servers
  async function optional(path) {
    const answer = await api(path);
    return answer.ok ? answer.body : null;
  }

  async function loadServers() {
    const [overview, connections, breakers, reloads, endpoints, hooks, memory] = await Promise.all([
      optional("/admin/overview"),
      apiJson("/admin/connections"),
      apiJson("/admin/breakers"),
      optional("/admin/config/reload"),
      optional("/admin/endpoints"),
      optional("/admin/hooks"),
      optional("/admin/registry/memory"),
    ]);
    const memoryOf = (memory && memory.servers) || {};
    showConfig(reloads);
    showEndpoints(endpoints);
    showHooks(hooks);
    const gateway = (overview && overview.gateway) || {};
    const figures = [
      ["Ready", gateway.ready === undefined ? "—" : gateway.ready ? "yes" : "no"],
      ["Tools", text(gateway.tools)],
      ["Calls/s", fixed(gateway.calls_per_sec, 2)],
      ["Error ratio", percent(gateway.error_ratio)],
      ["p50", ms(gateway.p50_ms)],
      ["p99", ms(gateway.p99_ms)],
    ];
    $("gateway-figures").replaceChildren(
      ...figures.map(([label, value]) => el("div", {}, el("dt", { text: label }), el("dd", { text: value }))),
    );
    const byName = new Map();
    for (const server of (overview && overview.servers) || []) byName.set(server.name, server);
    for (const name of Object.keys(breakers || {})) if (!byName.has(name)) byName.set(name, { name });
    const names = [...byName.keys()].sort();
    const rows = names.map((name) => {
      const server = byName.get(name);
      const connection = (connections || {})[name] || {};
      const breaker = (breakers || {})[name] || {};
      const state = breaker.state || server.breaker;
      const lastError = server.last_error
        ? [text(server.last_error.category), el("br"), el("span", { class: "hint", text: when(server.last_error.at) })]
        : connection.last_error
          ? text(connection.last_error)
          : "—";
      const forced = breaker.forced_open ? [" ", badge("forced", "warn")] : [];
      // Why it is not closed, and since when: a server that is down says why.
      const why =
        state && state !== "closed" && breaker.reason
          ? [el("br"), el("span", { class: "hint breaker-reason", text: breaker.reason + (breaker.since ? " · since " + when(breaker.since) : "") })]
          : [];
      const held = memoryOf[name];
      const memoryCell = held
        ? el("td", {
            class: "num",
            title: "estimated: tools " + mib(held.tools) + ", schemas " + mib(held.schemas) + " (" + held.schemas_compiled +
              " compiled), shared $defs " + mib(held.shared) + ", resources " + mib(held.resources) + ", documents " + mib(held.documents),
            text: mib(held.total),
          })
        : el("td", { class: "num" }, "—");
      return el(
        "tr",
        { "data-server": name },
        el("th", { scope: "row" }, name),
        el("td", {}, text(server.transport || connection.transport)),
        el("td", {}, text(server.era || connection.protocol_version)),
        el("td", {}, stateBadge(server.connection || connection.state || null)),
        el("td", { class: "breaker-state", "data-state": text(state) }, stateBadge(state), ...forced, ...why),
        el("td", { class: "num" }, fixed(server.calls_per_sec, 2)),
        el("td", { class: "num" }, percent(server.error_ratio)),
        el("td", { class: "num" }, ms(server.p50_ms)),
        el("td", { class: "num" }, ms(server.p99_ms)),
        memoryCell,
        el("td", {}, lastError),
        el(
          "td",
          {},
          el(
            "div",
            { class: "actions" },
            el("button", {
              type: "button",
              class: "danger",
              "data-action": "open",
              "aria-label": "Force open the breaker of " + name,
              text: "Force open",
              onclick: () => breakerAction(name, "open"),
            }),
            el("button", {
              type: "button",
              class: "secondary",
              "data-action": "close",
              "aria-label": "Close the breaker of " + name,
              text: "Close",
              onclick: () => breakerAction(name, "close"),
            }),
          ),
        ),
      );
    });
    // A refresh replaces the rows: a focused breaker button gets its focus back.
    const active = document.activeElement;
    const focused = active && active.closest("#servers-table tr[data-server]") && active.getAttribute("data-action")
      ? [active.closest("tr").getAttribute("data-server"), active.getAttribute("data-action")]
      : null;
    replaceRows($("servers-table").querySelector("tbody"), rows, 12, "No servers configured.");
    const table = $("servers-table");
    table.setAttribute("data-renders", String(Number(table.getAttribute("data-renders") || 0) + 1));
    if (focused) {
      const again = $("servers-table").querySelector('tr[data-server="' + CSS.escape(focused[0]) + '"] button[data-action="' + focused[1] + '"]');
      if (again) again.focus();
    }
  }

  // Each endpoint: its path, its selection as configured, the tools it serves now.
  function showEndpoints(report) {
    const endpoints = (report && report.endpoints) || [];
    const rows = endpoints.map((endpoint) => {
      const select = endpoint.select || {};
      const criteria = Object.keys(select)
        .filter((key) => select[key] !== null && !(Array.isArray(select[key]) && select[key].length === 0))
        .map((key) => key + ": " + (Array.isArray(select[key]) ? select[key].join(", ") : String(select[key])));
      const tools = endpoint.tools || [];
      return el(
        "tr",
        { "data-endpoint": endpoint.name },
        el("th", { scope: "row" }, el("code", { text: endpoint.path })),
        el("td", { text: criteria.length ? criteria.join(" · ") : "everything" }),
        el("td", {}, text(endpoint.tool_count), tools.length ? [el("br"), el("span", { class: "hint", text: tools.join(", ") })] : []),
      );
    });
    replaceRows($("endpoints-table").querySelector("tbody"), rows, 3, "No endpoints configured: every caller uses /mcp.");
    fillPlaygroundEndpoints(endpoints);
  }

  // The playground calls through the plain /mcp or a chosen endpoint.
  function fillPlaygroundEndpoints(endpoints) {
    const select = $("playground-endpoint");
    const previous = select.value;
    select.replaceChildren(
      el("option", { value: "", text: "/mcp (every tool)" }),
      ...endpoints.map((endpoint) => el("option", { value: endpoint.name, text: endpoint.path })),
    );
    if (endpoints.some((endpoint) => endpoint.name === previous)) select.value = previous;
  }

  // Each guardrail hook: what it matches and does, and its decisions since start.
  function showHooks(report) {
    const hooks = (report && report.hooks) || [];
    const rows = hooks.map((hook) => {
      const matches = [
        (hook.match_tools || []).length ? "tools: " + hook.match_tools.join(", ") : null,
        (hook.match_servers || []).length ? "servers: " + hook.match_servers.join(", ") : null,
      ].filter(Boolean);
      const does = hook.builtin
        ? "built-in " + hook.builtin + ((hook.detect || []).length ? " (" + hook.detect.join(", ") + ")" : "")
        : "tool " + text(hook.tool) + " on " + text(hook.server);
      const decisions = Object.entries(hook.decisions || {}).map(([decision, count]) => decision + " " + count);
      return el(
        "tr",
        { "data-hook": hook.name },
        el("th", { scope: "row", text: hook.name }),
        el("td", { text: text(hook.phase) }),
        el("td", { text: matches.length ? matches.join(" · ") : "every tool" }),
        el("td", { text: does + (hook.failure ? " · fails " + hook.failure : "") }),
        el("td", { class: "hook-decisions", text: decisions.length ? decisions.join(" · ") : "none yet" }),
      );
    });
    replaceRows($("hooks-table").querySelector("tbody"), rows, 5, "No guardrail hooks configured.");
  }

  // The configuration in force and the last reload (docs/reload.md).
  function showConfig(reloads) {
    if (!reloads) {
      $("config-status").textContent = "";
      return;
    }
    const last = reloads.last;
    let said = "Configuration generation " + text(reloads.generation) + " · ";
    if (!last) said += "not reloaded since the start";
    else {
      said += "last reload " + last.outcome + " (" + last.trigger + ", " + when(last.at) + ")";
      if (last.error) said += ": " + last.error;
      if (last.restart_required && last.restart_required.length) {
        said += " · awaiting a restart: " + last.restart_required.join(", ");
      }
    }
    $("config-status").textContent = said;
    $("config-status").setAttribute("data-generation", text(reloads.generation));
  }

  async function reloadConfig() {
    try {
      const answer = await api("/admin/config/reload", { method: "POST" });
      const report = answer.body || {};
      if (answer.status === 422) say("Configuration refused, the running one stays: " + (report.error || ""), true);
      else if (!answer.ok) say("Reload: " + ((report && report.error) || "refused (" + answer.status + ")"), true);
      else if (report.outcome === "unchanged") say("Configuration reloaded: nothing changed.");
      else say("Configuration reloaded: generation " + report.generation + ".");
      await load("servers", false);
    } catch (error) {
      failed(error);
    }
  }

  async function breakerAction(server, action) {
    try {
      const answer = await api("/admin/breakers/" + encodeURIComponent(server) + "/" + action, { method: "POST" });
      if (!answer.ok) {
        say("Breaker of " + server + ": " + ((answer.body && answer.body.error) || "refused (" + answer.status + ")"), true);
        return;
      }
      const state = answer.body && answer.body.breaker ? answer.body.breaker.state : action;
      say("Breaker of " + server + " is now " + state + ".");
      await load("servers", false);
    } catch (error) {
      failed(error);
    }
  }

  // ---------------------------------------------------------------- Catalogue
  function annotationTags(tool) {
    const annotations = tool.annotations || {};
    const tags = [];
    for (const [key, value] of Object.entries(annotations)) {
      if (key === "title") continue;
      if (value === true) tags.push(badge(key.replace(/Hint$/, ""), key === "destructiveHint" ? "bad" : null));
      else if (value !== false && value !== null) tags.push(badge(key + ": " + JSON.stringify(value)));
    }
    return tags.length ? el("div", { class: "tags" }, tags) : "—";
  }

  // What catalogue control (`[tools.NAME]`) changed of a tool: a rename (from the server's
  // own name), the description, annotations, fixed and default arguments (names only, never
  // values); a namespaced copy names the server's own name for it.
  function controlChanges(tool) {
    const control = tool.control;
    const tags = [];
    const renamed = tool.upstream_name && tool.upstream_name !== tool.name;
    if (control) {
      if (control.renamed) tags.push(badge("renamed from " + (tool.upstream_name || "?"), "warn"));
      if (control.description) tags.push(badge("description", "warn"));
      const list = (value) => (Array.isArray(value) ? value : []);
      if (list(control.annotations).length) tags.push(badge("annotations: " + control.annotations.join(", "), "warn"));
      if (list(control.fixed_arguments).length) tags.push(badge("fixed: " + control.fixed_arguments.join(", "), "warn"));
      if (list(control.default_arguments).length) tags.push(badge("defaults: " + control.default_arguments.join(", "), "warn"));
    }
    if (renamed && !(control && control.renamed)) tags.push(badge("server's name: " + tool.upstream_name));
    return tags.length ? el("div", { class: "tags" }, tags) : "—";
  }

  function renderCatalogue() {
    const query = $("catalogue-search").value.trim().toLowerCase();
    const matches = catalogue.tools.filter((tool) => {
      if (!query) return true;
      const haystack = [tool.name, tool.server, tool.tier, tool.status, tool.description, tool.schema_hash, tool.definition_hash]
        .filter(Boolean)
        .join(" ")
        .toLowerCase();
      return haystack.includes(query);
    });
    const rows = matches.map((tool) =>
      el(
        "tr",
        { "data-tool": tool.name },
        el("th", { scope: "row" }, tool.name),
        el("td", {}, text(tool.server)),
        el("td", {}, text(tool.tier)),
        el("td", {}, badge(text(tool.status), tool.status === "active" ? "ok" : "warn"), tool.healthy === false ? [" ", badge("unhealthy", "bad")] : []),
        el("td", {}, el("code", { title: tool.schema_hash || "" }, shortHash(tool.schema_hash))),
        el("td", {}, el("code", { title: tool.definition_hash || "" }, shortHash(tool.definition_hash))),
        el("td", {}, annotationTags(tool)),
        el("td", {}, controlChanges(tool)),
      ),
    );
    replaceRows($("catalogue-table").querySelector("tbody"), rows, 8, query ? "No tool matches." : "No tools.");
    $("catalogue-count").textContent = matches.length + " of " + catalogue.tools.length + " tools";
    $("catalogue-hidden").textContent = (catalogue.hidden || []).length
      ? "Hidden by catalogue control ([tools.NAME] hide): " + catalogue.hidden.join(", ") + "."
      : "";
  }

  // Every tool of `/admin/registry`, sorted, each with its description, annotations and
  // inputSchema: from the registry report when it has them, else from the MCP catalogue
  // (`/tools?format=mcp`, which lists what an anonymous caller may see).
  async function loadTools() {
    const registry = await apiJson("/admin/registry");
    const tools = (registry.tools || []).slice().sort((a, b) => String(a.name).localeCompare(String(b.name)));
    if (tools.some((t) => t.input_schema === undefined && t.inputSchema === undefined)) {
      const listed = await optional("/tools?format=mcp");
      const byName = new Map(((listed && listed.tools) || []).map((t) => [t.name, t]));
      for (const tool of tools) {
        const mcp = byName.get(tool.name);
        if (!mcp) continue;
        if (tool.input_schema === undefined) tool.input_schema = mcp.inputSchema;
        if (tool.annotations === undefined) tool.annotations = mcp.annotations;
        if (tool.description === undefined) tool.description = mcp.description;
      }
    }
    catalogue.tools = tools;
    catalogue.hidden = Array.isArray(registry.hidden) ? registry.hidden : [];
    return tools;
  }

  // The federated resources, templates and prompts (`/admin/registry/surface`): counts per
  // server, what two servers both claim, and the items (the first `max_items` of each kind).
  function renderSurface(surface) {
    const totals = surface.totals || {};
    const servers = surface.servers || [];
    const max = surface.max_items;
    const cut = ["resources", "resource_templates", "prompts"].some((k) => (totals[k] || 0) > (surface[k] || []).length);
    $("surface-summary").textContent =
      (totals.resources || 0) + " resources, " + (totals.resource_templates || 0) + " resource templates and " + (totals.prompts || 0) +
      " prompts from " + servers.length + (servers.length === 1 ? " server" : " servers") +
      (cut ? "; the tables below list the first " + max + " of each kind." : ".");
    replaceRows(
      $("surface-table").querySelector("tbody"),
      servers.map((s) =>
        el("tr", { "data-server": s.server }, el("th", { scope: "row" }, text(s.server)), el("td", {}, String(s.resources)),
          el("td", {}, String(s.resource_templates)), el("td", {}, String(s.prompts)), el("td", {}, s.completions ? badge("yes", "ok") : "no")),
      ),
      5,
      "No server offers resources or prompts.",
    );
    const claimed = surface.collisions || [];
    if (!claimed.length) {
      $("surface-collisions").replaceChildren(el("p", { class: "empty", text: "No resource, template or prompt claimed by two servers." }));
    } else {
      const servedAs = (c) =>
        c.kind === "prompt" ? c.servers.map((s) => s + "__" + c.name).join(", ") : "by neither (unless a prefix in the configuration names the owner)";
      const rows = claimed.map((c) =>
        el("tr", { "data-kind": c.kind }, el("th", { scope: "row" }, text(c.name)), el("td", {}, text(c.kind)), el("td", {}, (c.servers || []).join(", ")), el("td", {}, servedAs(c))),
      );
      $("surface-collisions").replaceChildren(
        el("div", { class: "scroll" }, el("table", { id: "surface-collisions-table" }, el("caption", { text: "Claimed by more than one server" }),
          el("thead", {}, el("tr", {}, ["URI, template or prompt", "Kind", "Claimed by", "Served"].map((h) => el("th", { scope: "col", text: h })))),
          el("tbody", {}, rows))),
      );
    }
    replaceRows(
      $("surface-prompts").querySelector("tbody"),
      (surface.prompts || []).map((p) =>
        el("tr", { "data-server": p.server }, el("th", { scope: "row" }, text(p.name)), el("td", {}, text(p.server)),
          el("td", {}, p.upstream_name === p.name ? "—" : text(p.upstream_name)), el("td", {}, String(p.arguments))),
      ),
      4,
      "No prompts.",
    );
    replaceRows(
      $("surface-resources").querySelector("tbody"),
      (surface.resources || []).map((r) =>
        el("tr", { "data-server": r.server }, el("th", { scope: "row" }, el("code", {}, text(r.uri))), el("td", {}, text(r.name)),
          el("td", {}, text(r.server)), el("td", {}, text(r.mime_type))),
      ),
      4,
      "No resources.",
    );
    replaceRows(
      $("surface-templates").querySelector("tbody"),
      (surface.resource_templates || []).map((t) =>
        el("tr", { "data-server": t.server }, el("th", { scope: "row" }, el("code", {}, text(t.uri_template))), el("td", {}, text(t.server)),
          el("td", {}, text(t.mime_type))),
      ),
      3,
      "No resource templates.",
    );
  }

  async function loadCatalogue() {
    const [, collisions, surface] = await Promise.all([loadTools(), apiJson("/admin/registry/collisions"), apiJson("/admin/registry/surface")]);
    renderCatalogue();
    renderSurface(surface);
    const list = collisions.collisions || [];
    if (!list.length) {
      $("collisions").replaceChildren(el("p", { class: "empty", text: "No collisions." }));
    } else {
      const rows = list.map((c) =>
        el("tr", {}, el("th", { scope: "row" }, text(c.name)), el("td", {}, text(c.server)), el("td", {}, text(c.kind)), el("td", {}, text(c.owner)), el("td", {}, text(c.exposed)), el("td", {}, text(c.detail))),
      );
      $("collisions").replaceChildren(
        el("div", { class: "scroll" }, el("table", {}, el("caption", { text: "Names offered and not served as asked" }),
          el("thead", {}, el("tr", {}, ["Name", "Offered by", "Kind", "Owner", "Exposed as", "Detail"].map((h) => el("th", { scope: "col", text: h })))),
          el("tbody", {}, rows))),
      );
    }
    // Drift asks every registry server for its live list: loaded once per visit, not live.
    $("drift").replaceChildren(el("p", { class: "hint", text: "Comparing with the live lists…" }));
    const drift = await apiJson("/admin/registry/drift");
    const servers = Object.entries(drift || {});
    if (!servers.length) {
      $("drift").replaceChildren(el("p", { class: "empty", text: "No registry servers to compare." }));
    } else {
      const rows = servers.map(([server, report]) => {
        let detail;
        if (report.error) detail = [badge("error", "bad"), " ", report.error];
        else if (report.skipped) detail = report.skipped;
        else if (!report.drifted) detail = badge("in step", "ok");
        else {
          detail = [
            (report.added || []).length ? "added: " + report.added.join(", ") + ". " : "",
            (report.removed || []).length ? "removed: " + report.removed.join(", ") + ". " : "",
            (report.schema_changed || []).length ? "schema changed: " + report.schema_changed.map((c) => c.tool).join(", ") + ". " : "",
            report.origin_changed ? "target origin changed: " + text(report.origin_changed.approved) + " → " + text(report.origin_changed.offered) + " (waiting for approval)." : "",
          ];
        }
        return el("tr", {}, el("th", { scope: "row" }, server), el("td", {}, detail));
      });
      $("drift").replaceChildren(
        el("table", {}, el("caption", { text: "Drift by registry server" }),
          el("thead", {}, el("tr", {}, el("th", { scope: "col", text: "Server" }), el("th", { scope: "col", text: "Drift" }))),
          el("tbody", {}, rows)),
      );
    }
  }

  // ---------------------------------------------------------------- Approvals
  // Longest-common-subsequence diff of two token lists: [{op: "same"|"del"|"ins", token}].
  function diffTokens(a, b) {
    const n = a.length;
    const m = b.length;
    if (n * m > 250000) return a.map((t) => ({ op: "del", token: t })).concat(b.map((t) => ({ op: "ins", token: t })));
    const lcs = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
    for (let i = n - 1; i >= 0; i--) {
      for (let j = m - 1; j >= 0; j--) {
        lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
      }
    }
    const out = [];
    let i = 0;
    let j = 0;
    while (i < n && j < m) {
      if (a[i] === b[j]) {
        out.push({ op: "same", token: a[i] });
        i++;
        j++;
      } else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push({ op: "del", token: a[i++] });
      else out.push({ op: "ins", token: b[j++] });
    }
    while (i < n) out.push({ op: "del", token: a[i++] });
    while (j < m) out.push({ op: "ins", token: b[j++] });
    return out;
  }

  // Runs of removed or added tokens as <del>/<ins>, each opened with words a screen reader
  // says ("removed:", "added:") that are not shown.
  function renderTokens(ops) {
    const runs = [];
    for (const part of ops) {
      const last = runs[runs.length - 1];
      if (last && last.op === part.op) last.token += part.token;
      else runs.push({ op: part.op, token: part.token });
    }
    return runs.map((run) =>
      run.op === "same"
        ? run.token
        : el(run.op, {}, el("span", { class: "sr", text: run.op === "del" ? "removed: " : "added: " }), run.token),
    );
  }

  // The approved definition against the pending one: a line diff of the whole definitions
  // when the gateway sends them, else a word diff of the descriptions.
  function definitionDiff(item) {
    const approved = item.approved_definition;
    const pending = item.pending_definition;
    if (approved !== undefined || pending !== undefined) {
      const lines = (value) => (value === undefined || value === null ? [] : JSON.stringify(value, null, 2).split("\n"));
      const ops = diffTokens(lines(approved), lines(pending));
      return el(
        "pre",
        { class: "diff", "aria-label": "Approved definition against the pending one" },
        ops.map((part) => {
          const sign = { same: " ", del: "−", ins: "+" }[part.op];
          const body = part.op === "same" ? part.token : el(part.op, {}, part.token);
          return el("span", { class: "line" }, el("span", { class: "sign", "aria-hidden": "true" }, sign), body);
        }),
      );
    }
    const words = (value) => (typeof value === "string" ? value.split(/(\s+)/).filter((t) => t !== "") : []);
    const before = item.approved_description;
    const after = item.pending_description;
    if (before === after) return el("p", { class: "hint", text: "The description is unchanged: the difference is elsewhere in the definition (see the hashes)." });
    return el(
      "div",
      { class: "diff", "aria-label": "Description: approved against pending" },
      el("span", { class: "line" }, el("strong", { text: "Description: " }), renderTokens(diffTokens(words(before), words(after)))),
      el("span", { class: "line hint", text: typeof before === "string" ? "" : "(no approved description)" }),
    );
  }

  // Tool calls waiting for a person (`[approvals]`, `@approval`): the facts the approver
  // needs (tool, arguments as the server will see them, who asks), approve and deny.
  async function loadCallApprovals() {
    const report = await apiJson("/admin/approvals");
    const waiting = report.waiting || [];
    const undecided = waiting.filter((a) => a.status === "pending");
    $("call-approvals-summary").textContent = undecided.length
      ? undecided.length + " call(s) waiting for a decision; approvals expire after " + report.limits.expiry_secs + " s."
      : "No tool call is waiting for a decision.";
    const historyRows = (report.history || []).map((a) => el(
      "tr", { "data-approval": a.id },
      el("td", { text: a.asked_at }),
      el("td", { text: a.subject || "anonymous" }),
      el("td", { text: a.tool }),
      el("td", {}, badge(a.status, a.status === "used" ? "ok" : a.status === "denied" ? "bad" : "warn")),
      el("td", { text: a.decided_by || "" }),
      el("td", {}, el("code", { text: String(a.args_sha256).slice(0, 16) + "…" })),
    ));
    replaceRows($("call-approvals-history").tBodies[0], historyRows, 6, "Nothing decided yet.");
    const list = $("call-approvals-list");
    const signature = JSON.stringify(waiting.map((a) => [a.id, a.status]));
    if (list.getAttribute("data-signature") === signature && list.childElementCount) return undecided.length;
    list.setAttribute("data-signature", signature);
    list.replaceChildren(
      ...waiting.map((a) => {
        const titleId = "call-approval-" + a.id;
        const decidable = a.status === "pending";
        return el(
          "article",
          { class: "pending", "aria-labelledby": titleId, "data-approval": a.id, "data-status": a.status },
          el("h3", { id: titleId }, a.tool + " on " + a.server + " for " + (a.subject || "an anonymous caller")),
          el(
            "dl",
            {},
            el("dt", { text: "Status" }), el("dd", { text: a.status + (a.decided_by ? " by " + a.decided_by : "") }),
            el("dt", { text: "Approver" }), el("dd", { text: a.approver === "user" ? "the caller's user (an operator may decide)" : "an operator" }),
            el("dt", { text: "Why" }), el("dd", { text: a.rule }),
            el("dt", { text: "Through" }), el("dd", { text: a.endpoint ? "/mcp/" + a.endpoint : "/mcp" }),
            el("dt", { text: "Asked" }), el("dd", { text: a.asked_at }),
            el("dt", { text: "Expires" }), el("dd", { text: a.expires_at }),
            el("dt", { text: "Arguments digest" }), el("dd", {}, el("code", { text: a.args_sha256 })),
          ),
          el("p", { class: "hint", text: "Arguments, as the server will receive them:" }),
          el("pre", { class: "arguments", text: JSON.stringify(a.arguments, null, 2) }),
          decidable
            ? el("p", {},
              el("button", { type: "button", "data-action": "approve-call", "aria-label": "Approve the call of " + a.tool + " for " + (a.subject || "an anonymous caller"), text: "Approve", onclick: (event) => decideCall(a, "approve", event.currentTarget) }),
              " ",
              el("button", { type: "button", class: "secondary", "data-action": "deny-call", "aria-label": "Deny the call of " + a.tool + " for " + (a.subject || "an anonymous caller"), text: "Deny", onclick: (event) => decideCall(a, "deny", event.currentTarget) }))
            : el("p", { class: "hint", text: "Approved: waits for the caller to send the call (once)." }),
        );
      }),
    );
    return undecided.length;
  }

  async function decideCall(item, action, button) {
    button.disabled = true;
    try {
      const answer = await api("/admin/approvals/" + encodeURIComponent(item.id) + "/" + action, { body: {} });
      if (!answer.ok) {
        say("Decision on " + item.tool + " refused: " + ((answer.body && answer.body.error) || answer.status), true);
        button.disabled = false;
        return;
      }
      say((action === "approve" ? "Approved" : "Denied") + " the call of " + item.tool + " for " + (item.subject || "an anonymous caller") + ".");
      await load("approvals", false);
    } catch (error) {
      failed(error);
    }
  }

  async function loadApprovals() {
    const calls = await loadCallApprovals();
    const pins = await apiJson("/admin/registry/pins");
    const pending = pins.pending || [];
    const waitingCount = pending.length + calls;
    $("pending-badge").textContent = waitingCount ? String(waitingCount) : "";
    $("pending-badge").hidden = !waitingCount;
    if (!pins.enabled) {
      $("pins-summary").textContent = pending.length
        ? "Definition pinning is off (catalogue.pin_tool_definitions = false); " + pending.length + " OpenAPI target origin change(s) waiting for approval."
        : "Definition pinning is off (catalogue.pin_tool_definitions = false): nothing waits for approval.";
    } else {
      $("pins-summary").textContent = text(pins.pinned) + " definitions pinned in " + text(pins.pin_file) + "; " + pending.length + " waiting for approval.";
    }
    const list = $("pending-list");
    // A live refresh leaves an unchanged list alone (keeps focus on its buttons).
    const signature = JSON.stringify(pending);
    if (list.getAttribute("data-signature") === signature && list.childElementCount) return;
    list.setAttribute("data-signature", signature);
    if (!pending.length) {
      list.replaceChildren(el("p", { class: "empty", text: "No definition change is waiting for approval." }));
      return;
    }
    list.replaceChildren(
      ...pending.map((item, index) => {
        const titleId = "pending-" + index;
        const what = pendingName(item);
        return el(
          "article",
          { class: "pending", "aria-labelledby": titleId, "data-server": item.server, "data-tool": item.tool },
          el("h3", { id: titleId }, what + " on " + item.server),
          el(
            "dl",
            {},
            el("dt", { text: "Waiting since" }), el("dd", { text: when(item.since_epoch_secs) }),
            el("dt", { text: "Served meanwhile" }), el("dd", { text: item.serving === "approved" ? "the approved definition" : "nothing (hidden until approved)" }),
            el("dt", { text: "Approved hash" }), el("dd", {}, el("code", { text: text(item.approved_hash) })),
            el("dt", { text: "Pending hash" }), el("dd", {}, el("code", { text: text(item.pending_hash) })),
          ),
          definitionDiff(item),
          el("p", {}, el("button", {
            type: "button",
            "data-action": "approve",
            "aria-label": "Approve the new definition of " + what + " on " + item.server,
            text: "Approve",
            onclick: (event) => approve(item, event.currentTarget),
          })),
        );
      }),
    );
  }

  // What a pending change is of: a tool, a prompt, or an OpenAPI server's target origin.
  function pendingName(item) {
    if (item.kind === "origin") return "the target origin";
    return item.kind === "prompt" ? item.prompt : item.tool;
  }

  async function approve(item, button) {
    button.disabled = true;
    const what = pendingName(item);
    const body = item.kind === "origin" ? { origin: item.server } : item.kind === "prompt" ? { prompt: item.prompt, server: item.server } : { tool: item.tool, server: item.server };
    try {
      const answer = await api("/admin/registry/approve", { body });
      if (!answer.ok) {
        say("Approval of " + what + " refused: " + ((answer.body && answer.body.error) || answer.status), true);
        button.disabled = false;
        return;
      }
      say("Approved the new definition of " + what + " on " + item.server + ".");
      await load("approvals", false);
    } catch (error) {
      failed(error);
    }
  }

  // ---------------------------------------------------------------- Recent calls
  // Served (ok), served otherwise (warn: the tool's own error, a fallback), or a failure the
  // error-ratio alert counts (bad).
  function outcomeKind(outcome) {
    if (["success", "cache_hit", "shared"].includes(outcome)) return "ok";
    if (outcome === "tool_error" || String(outcome).startsWith("fallback")) return "warn";
    return "bad";
  }

  async function loadCalls() {
    const answer = await api("/admin/calls");
    const tbody = $("calls-table").querySelector("tbody");
    if (!answer.ok) {
      $("calls-summary").textContent = "The gateway does not keep recent calls here (" + answer.status + ").";
      replaceRows(tbody, [], 8, "No record.");
      return;
    }
    const calls = answer.body.calls || [];
    $("calls-summary").textContent = answer.body.capacity === 0
      ? "The record of recent calls is off (admin.recent_calls = 0)."
      : "The last " + calls.length + " of at most " + text(answer.body.capacity) + " calls.";
    const rows = calls.map((call) =>
      el(
        "tr",
        {},
        el("td", { class: "mono" }, when(call.at)),
        el("td", {}, el("code", { text: text(call.subject) })),
        el("td", {}, text(call.tool), call.requested_tool && call.requested_tool !== call.tool ? el("span", { class: "hint", text: " (asked " + call.requested_tool + ")" }) : null),
        el("td", {}, text(call.server)),
        el("td", {}, badge(text(call.outcome), outcomeKind(call.outcome))),
        el("td", { class: "num" }, text(call.attempts)),
        el("td", { class: "num" }, typeof call.latency_us === "number" ? (call.latency_us / 1000).toFixed(1) + " ms" : "—"),
        el("td", {}, el("code", { text: text(call.trace_id) })),
      ),
    );
    replaceRows(tbody, rows, 8, "No calls yet.");
  }

  // ---------------------------------------------------------------- Playground
  async function loadPlayground(first) {
    if (!first && catalogue.schemas) return;
    const [endpoints] = await Promise.all([optional("/admin/endpoints"), loadTools()]);
    fillPlaygroundEndpoints((endpoints && endpoints.endpoints) || []);
    const schemas = new Map();
    for (const tool of catalogue.tools) {
      // A tool listed with no inputSchema takes any object: an empty form.
      const schema = tool.input_schema === null ? { type: "object" } : tool.input_schema || tool.inputSchema;
      if (schema) schemas.set(tool.name, { schema, description: tool.description });
    }
    catalogue.schemas = schemas;
    const select = $("playground-tool");
    const previous = select.value;
    select.replaceChildren(...catalogue.tools.map((tool) => el("option", { value: tool.name, text: tool.name + " (" + tool.server + ")" })));
    if (previous && schemas.has(previous)) select.value = previous;
    renderForm();
  }

  function fieldId(name) {
    return "arg-" + name.replace(/[^A-Za-z0-9_-]/g, "_");
  }

  // One form control per property of the tool's inputSchema: defaults prefilled, enums as
  // selects, nested objects and arrays as JSON text.
  function renderForm() {
    const name = $("playground-tool").value;
    const entry = catalogue.schemas && catalogue.schemas.get(name);
    $("playground-description").textContent = (entry && entry.description) || "";
    renderApp((catalogue.tools || []).find((tool) => tool.name === name));
    const fields = $("playground-fields");
    if (!entry) {
      fields.replaceChildren(el("p", { class: "empty", text: name ? "No inputSchema known for this tool." : "No tools." }));
      return;
    }
    const schema = entry.schema || {};
    const required = new Set(schema.required || []);
    const properties = Object.entries(schema.properties || {});
    if (!properties.length) {
      fields.replaceChildren(el("p", { class: "empty", text: "This tool takes no arguments." }));
      return;
    }
    fields.replaceChildren(
      ...properties.map(([prop, spec]) => {
        spec = spec || {};
        const id = fieldId(prop);
        const hintId = id + "-hint";
        const type = Array.isArray(spec.type) ? spec.type.find((t) => t !== "null") : spec.type;
        const hints = [];
        if (spec.description) hints.push(spec.description);
        if (type) hints.push("type " + type);
        if (spec.minimum !== undefined) hints.push("minimum " + spec.minimum);
        if (spec.maximum !== undefined) hints.push("maximum " + spec.maximum);
        if (spec.default !== undefined) hints.push("default " + JSON.stringify(spec.default));
        const common = { id, name: prop, "data-type": type || "json", "aria-describedby": hintId, required: required.has(prop) };
        let control;
        if (Array.isArray(spec.enum)) {
          control = el(
            "select",
            common,
            required.has(prop) && spec.default !== undefined ? null : el("option", { value: "", text: "(not set)" }),
            spec.enum.map((value) => el("option", { value: JSON.stringify(value), text: String(value), selected: spec.default === value })),
          );
          control.setAttribute("data-type", "enum");
        } else if (type === "boolean") {
          control = el(
            "select",
            common,
            el("option", { value: "", text: "(not set)" }),
            el("option", { value: "true", text: "true", selected: spec.default === true }),
            el("option", { value: "false", text: "false", selected: spec.default === false }),
          );
        } else if (type === "integer" || type === "number") {
          control = el("input", { ...common, type: "number", step: type === "integer" ? "1" : "any", value: spec.default !== undefined ? spec.default : null });
        } else if (type === "string") {
          control = el("input", { ...common, type: "text", autocomplete: "off", value: spec.default !== undefined ? spec.default : null });
        } else {
          control = el("textarea", { ...common, spellcheck: "false", rows: 3 });
          control.setAttribute("data-type", "json");
          if (spec.default !== undefined) control.value = JSON.stringify(spec.default, null, 2);
        }
        return el(
          "div",
          { class: "field" },
          el("label", { for: id }, prop, required.has(prop) ? el("span", { class: "req" }, " (required)") : null),
          control,
          el("span", { id: hintId, class: "hint", text: hints.join(" · ") + (type && !["string", "integer", "number", "boolean"].includes(type) && !spec.enum ? " (JSON)" : "") }),
        );
      }),
    );
  }

  // A tool linking an MCP App (`_meta.ui.resourceUri`): which app, and on request the app
  // itself, framed `sandbox="allow-scripts"` (no same origin) from a one-time page the gateway
  // serves under the policy of the resource's `_meta.ui.csp` (`POST /admin/playground/app`).
  function renderApp(tool) {
    const box = $("playground-app");
    const ui = tool && tool.ui && typeof tool.ui === "object" ? tool.ui : null;
    const uri = ui && typeof ui.resourceUri === "string" ? ui.resourceUri : null;
    if (!uri) {
      box.hidden = true;
      box.replaceChildren();
      return;
    }
    const visibility = Array.isArray(ui.visibility) ? ui.visibility : null;
    const appOnly = visibility !== null && !visibility.includes("model");
    const shown = el("div", { id: "playground-app-shown" });
    box.hidden = false;
    box.replaceChildren(
      el("h3", { id: "playground-app-title", text: "MCP App" }),
      el("p", {}, "This tool links an app: ", el("code", { text: uri }), "."),
      appOnly
        ? el("p", {
            class: "app-only",
            text: "For the app only (visibility " + JSON.stringify(visibility) + "): the playground calls tools as a model would, so this tool is unknown to it.",
          })
        : null,
      el("button", { type: "button", id: "playground-app-show", text: "Show the app", onclick: () => showApp(uri, shown) }),
      shown,
    );
  }

  async function showApp(uri, shown) {
    shown.replaceChildren(el("p", { class: "hint", text: "Reading " + uri + "…" }));
    try {
      const answer = await api("/admin/playground/app", { body: { uri } });
      const body = answer.body || {};
      if (typeof body.frame !== "string") {
        const why = body.error && typeof body.error === "object" ? body.error.message : body.error;
        shown.replaceChildren(el("p", { class: "error", text: "Not shown: " + text(why) }));
        return;
      }
      shown.replaceChildren(
        el("iframe", { id: "playground-app-frame", sandbox: "allow-scripts", src: body.frame, title: "MCP App " + uri, class: "app-frame" }),
        el("p", { class: "hint" }, "Sandboxed (scripts, no same origin), under the policy ", el("code", { text: text(body.policy) }), "."),
      );
    } catch (error) {
      if (error instanceof Unauthorized) failed(error);
      else shown.replaceChildren(el("p", { class: "error", text: "Not shown: " + String(error.message || error) }));
    }
  }

  // The arguments the form describes; throws on a JSON field that does not parse.
  function formArguments() {
    const args = {};
    for (const control of $("playground-fields").querySelectorAll("input, select, textarea")) {
      const raw = control.value;
      if (raw === "") continue;
      const type = control.getAttribute("data-type");
      if (type === "enum") args[control.name] = JSON.parse(raw);
      else if (type === "boolean") args[control.name] = raw === "true";
      else if (type === "integer" || type === "number") {
        const number = Number(raw);
        if (!isFinite(number)) throw new Error(control.name + " is not a number");
        args[control.name] = number;
      } else if (type === "string") args[control.name] = raw;
      else {
        try {
          args[control.name] = JSON.parse(raw);
        } catch (error) {
          throw new Error(control.name + " is not valid JSON: " + error.message);
        }
      }
    }
    return args;
  }

  function showOutcome(kind, nodes) {
    const body = $("outcome-body");
    body.setAttribute("data-outcome", kind);
    body.replaceChildren(el("div", { class: kind === "result" ? "outcome-result" : "outcome-error" }, nodes));
  }

  async function callTool(event) {
    event.preventDefault();
    const tool = $("playground-tool").value;
    if (!tool) return;
    let args;
    try {
      args = formArguments();
    } catch (error) {
      showOutcome("invalid", [el("p", { class: "error", text: error.message })]);
      return;
    }
    const button = $("playground-call");
    button.disabled = true;
    $("outcome-body").setAttribute("data-outcome", "pending");
    try {
      const endpoint = $("playground-endpoint").value;
      const call = endpoint ? { tool, arguments: args, endpoint } : { tool, arguments: args };
      const answer = await api("/admin/playground", { body: call });
      const body = answer.body || {};
      if (body.error) {
        const error = body.error;
        const violations = (error.data && error.data.violations) || [];
        showOutcome("error", [
          el("p", {}, el("strong", { text: "Error " + text(error.code) + (error.data && error.data.category ? " (" + error.data.category + ")" : "") + ": " }), typeof error === "string" ? error : text(error.message)),
          violations.length
            ? el("ul", { "aria-label": "Violations" }, violations.map((v) => el("li", {}, el("code", { text: text(v.path) }), " ", text(v.message))))
            : null,
          error.data ? el("details", {}, el("summary", { text: "Error data" }), el("pre", { text: JSON.stringify(error.data, null, 2) })) : null,
        ]);
      } else if (body.result !== undefined) {
        const result = body.result || {};
        const failedTool = result.isError === true;
        showOutcome(failedTool ? "tool-error" : "result", [
          el("p", {}, el("strong", { text: failedTool ? "The tool answered an error:" : "Result:" })),
          el("pre", { text: JSON.stringify(result, null, 2) }),
        ]);
      } else {
        showOutcome("error", [el("p", { text: "Unexpected answer (" + answer.status + "): " + JSON.stringify(body).slice(0, 500) })]);
      }
    } catch (error) {
      if (error instanceof Unauthorized) failed(error);
      else showOutcome("error", [el("p", { class: "error", text: String(error.message || error) })]);
    } finally {
      button.disabled = false;
    }
  }

  // ---------------------------------------------------------------- start
  async function submitToken(event) {
    event.preventDefault();
    const value = $("token").value.trim();
    $("token-error").textContent = "";
    sessionStorage.setItem(TOKEN_KEY, value);
    try {
      // One cheap request to check the token before showing any page.
      await apiJson("/admin/breakers");
    } catch (error) {
      if (error instanceof Unauthorized) {
        signOut("The gateway refused this token (401). Check admin.token_file.");
      } else {
        sessionStorage.removeItem(TOKEN_KEY);
        $("token-error").textContent = String(error.message || error);
      }
      return;
    }
    $("token").value = "";
    if (location.hash.replace(/^#/, "") !== pageFromHash()) history.replaceState(null, "", "#servers");
    await open(pageFromHash());
    $("main").focus();
  }

  // Arrow keys move between the page links (Home/End: first/last); Enter or Space follow them.
  function navKeys(event) {
    const links = [...document.querySelectorAll("#nav a")];
    const index = links.indexOf(document.activeElement);
    if (index < 0) return;
    let next = null;
    if (event.key === "ArrowRight" || event.key === "ArrowDown") next = links[(index + 1) % links.length];
    else if (event.key === "ArrowLeft" || event.key === "ArrowUp") next = links[(index - 1 + links.length) % links.length];
    else if (event.key === "Home") next = links[0];
    else if (event.key === "End") next = links[links.length - 1];
    else if (event.key === " ") next = links[index];
    if (!next) return;
    event.preventDefault();
    if (event.key === " ") next.click();
    else next.focus();
  }

  function start() {
    $("token-form").addEventListener("submit", submitToken);
    $("sign-out").addEventListener("click", () => signOut("Token forgotten."));
    $("reload-config").addEventListener("click", reloadConfig);
    $("catalogue-search").addEventListener("input", renderCatalogue);
    $("catalogue-reload").addEventListener("click", () => load("catalogue", true));
    $("playground-tool").addEventListener("change", renderForm);
    $("playground-form").addEventListener("submit", callTool);
    $("nav").addEventListener("keydown", navKeys);
    window.addEventListener("hashchange", () => open(pageFromHash()));
    document.addEventListener("visibilitychange", scheduleRefresh);
    if (signedIn()) open(pageFromHash());
    else signOut("");
  }

  start();
})();
