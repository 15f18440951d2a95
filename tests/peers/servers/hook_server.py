"""Guardrail hooks as MCP tools, on the official Python MCP SDK, for tests/suite/hooks.rs.

    python hook_server.py PORT [--record FILE]     streamable HTTP on 127.0.0.1:PORT/mcp
    python hook_server.py --stdio [--record FILE]  stdio (the Lambda emulator's `direct-hooks`)

Runs on SDK 2.x (`MCPServer`, tests/peers/.venv) and 1.x (`FastMCP`, tests/peers/.venv-lambda).
Every tool takes the gateway's hook input `{phase, hook, tool, server, arguments, result?,
caller}` and answers `{decision, reason?, arguments?|result?}` (docs/hooks.md):

  guard_deny      deny when arguments.query contains "forbidden" (reason names the caller's
                  subject), else allow
  guard_rewrite   before: replace arguments.query "rewrite-me" by "frieren"; else allow
  guard_result    after: replace the result by one that says how many results it saw
  guard_hang      never answers in time (sleeps 600 s)
  guard_fail      raises: the SDK answers isError

With `--record FILE`, each input is appended to FILE as one JSON line (what a hook saw).
Prints `READY <port>` once listening (HTTP mode).
"""

import argparse
import json
import sys
from typing import Any

import anyio

try:  # SDK 2.x
    from mcp.server.mcpserver import MCPServer as Server
except ImportError:  # SDK 1.x
    from mcp.server.fastmcp import FastMCP as Server

server = Server("hook-peer")
RECORD = None


def record(name: str, payload: dict) -> None:
    if RECORD:
        with open(RECORD, "a", encoding="utf-8") as out:
            out.write(json.dumps({"tool": name, "input": payload}) + "\n")


def answer(decision: dict) -> str:
    # A JSON text block: the contract's fallback when structuredContent does not carry it.
    return json.dumps(decision)


@server.tool()
def guard_deny(
    phase: str, hook: str, tool: str, server: str, arguments: dict, caller: dict, result: dict | None = None
) -> str:
    """Deny calls whose query mentions "forbidden"."""
    record("guard_deny", {"phase": phase, "hook": hook, "tool": tool, "server": server,
                          "arguments": arguments, "caller": caller, "result": result})
    if "forbidden" in str(arguments.get("query", "")):
        return answer({"decision": "deny", "reason": f"forbidden query for {caller.get('subject')}"})
    return answer({"decision": "allow"})


@server.tool()
def guard_rewrite(
    phase: str, hook: str, tool: str, server: str, arguments: dict, caller: dict, result: dict | None = None
) -> str:
    """Rewrite the query "rewrite-me" to "frieren"."""
    record("guard_rewrite", {"phase": phase, "tool": tool, "arguments": arguments})
    if arguments.get("query") == "rewrite-me":
        return answer({"decision": "replace", "arguments": {**arguments, "query": "frieren"}})
    return answer({"decision": "allow"})


@server.tool()
def guard_result(
    phase: str, hook: str, tool: str, server: str, arguments: dict, caller: dict, result: dict | None = None
) -> str:
    """Replace the result by a summary of it."""
    record("guard_result", {"phase": phase, "tool": tool, "result": result})
    seen = len(((result or {}).get("structuredContent") or {}).get("results") or [])
    replaced = {
        "content": [{"type": "text", "text": f"replaced by the hook after {seen} results"}],
        "structuredContent": {"replaced": True, "results_seen": seen},
    }
    return answer({"decision": "replace", "result": replaced})


@server.tool()
def guard_app(
    phase: str, hook: str, tool: str, server: str, arguments: dict, caller: dict,
    result: dict | None = None, kind: str = "tool",
) -> str:
    """A resource's contents replaced by a page of the hook's own that claims a wider CSP
    (`connectDomains: ["*"]`) than the server gave; anything else allowed."""
    record("guard_app", {"kind": kind, "phase": phase, "tool": tool})
    if kind == "resource" and phase == "after":
        contents = [
            {**c, "text": "<!doctype html><p>checked by the hook</p>", "_meta": {"ui": {"csp": {"connectDomains": ["*"]}}}}
            for c in (result or {}).get("contents") or []
        ]
        return answer({"decision": "replace", "result": {"contents": contents}})
    return answer({"decision": "allow"})


@server.tool()
def guard_item(
    phase: str, hook: str, tool: str, server: str, arguments: dict, caller: dict,
    result: dict | None = None, kind: str = "tool",
) -> str:
    """By kind: a prompt's messages replaced by one of its own; a resource's contents replaced
    by something that is no resource (a tools/call result); anything else allowed."""
    record("guard_item", {"kind": kind, "phase": phase, "tool": tool, "server": server,
                          "arguments": arguments, "result": result})
    if kind == "prompt" and phase == "after":
        replaced = {"messages": [{"role": "user", "content": {"type": "text", "text": "replaced prompt"}}]}
        return answer({"decision": "replace", "result": replaced})
    if kind == "resource":
        return answer({"decision": "replace", "result": {"content": [{"type": "text", "text": "no resource"}]}})
    return answer({"decision": "allow"})


@server.tool()
async def guard_hang(
    phase: str, hook: str, tool: str, server: str, arguments: dict, caller: dict, result: dict | None = None
) -> str:
    """Never answers in time."""
    record("guard_hang", {"phase": phase, "tool": tool})
    await anyio.sleep(600)
    return answer({"decision": "allow"})


@server.tool()
def guard_fail(
    phase: str, hook: str, tool: str, server: str, arguments: dict, caller: dict, result: dict | None = None
) -> str:
    """Fails."""
    record("guard_fail", {"phase": phase, "tool": tool})
    raise RuntimeError("the hook broke")


async def serve_http(port: int) -> None:
    import uvicorn

    class Uvicorn(uvicorn.Server):
        async def startup(self, sockets=None) -> None:  # type: ignore[override]
            await super().startup(sockets=sockets)
            if self.started:
                print(f"READY {self.config.port}", flush=True)

    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True, host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await Uvicorn(config).serve()


def main() -> None:
    global RECORD
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int, nargs="?")
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--record")
    args = parser.parse_args()
    RECORD = args.record
    if args.stdio:
        server.run("stdio")
    else:
        anyio.run(serve_http, args.port)


if __name__ == "__main__":
    main()
