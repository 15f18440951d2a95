// The approval page of a tool call. The secret is the link's fragment: it is sent only in
// the JSON bodies below (never in a URL). Facts are set as text, never parsed as HTML.
(function () {
  "use strict";
  const $ = (id) => document.getElementById(id);
  const id = decodeURIComponent(location.pathname.split("/")[2] || "");
  const secret = location.hash.slice(1);
  // The fragment is no longer needed in the address bar (nor in the history).
  history.replaceState(null, "", location.pathname);

  function say(text, bad) {
    $("status").textContent = text;
    $("status").className = bad ? "status bad" : "status";
  }

  async function post(path, body) {
    const response = await fetch(path, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(body),
      credentials: "omit",
      cache: "no-store",
    });
    let answer = null;
    try { answer = await response.json(); } catch (_) { answer = null; }
    return { ok: response.ok, status: response.status, body: answer };
  }

  function show(facts) {
    $("tool").textContent = facts.tool;
    $("server").textContent = facts.server;
    $("subject").textContent = facts.subject || "an anonymous caller";
    $("endpoint").textContent = facts.endpoint ? "/mcp/" + facts.endpoint : "/mcp";
    $("rule").textContent = facts.rule;
    $("expires").textContent = facts.expires_at;
    $("digest").textContent = facts.args_sha256;
    $("arguments").textContent = JSON.stringify(facts.arguments, null, 2);
    $("facts").hidden = false;
  }

  async function decide(decision) {
    $("approve").disabled = true;
    $("deny").disabled = true;
    const answer = await post("/approvals/" + encodeURIComponent(id) + "/decision", { secret, decision });
    if (!answer.ok) {
      say("Not recorded: " + ((answer.body && answer.body.error) || answer.status), true);
      return;
    }
    say(decision === "approve"
      ? "Approved. The call runs when the caller sends it (once)."
      : "Denied. The call will not run.");
    $("facts").setAttribute("data-decided", decision);
  }

  async function start() {
    $("approve").addEventListener("click", () => decide("approve"));
    $("deny").addEventListener("click", () => decide("deny"));
    if (!id || !secret) {
      say("This link is incomplete: it needs the part after #.", true);
      return;
    }
    const answer = await post("/approvals/" + encodeURIComponent(id) + "/view", { secret });
    if (!answer.ok) {
      say((answer.body && answer.body.error) || "No approval waits at this link.", true);
      return;
    }
    show(answer.body);
    say("A tool call waits for your decision.");
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
