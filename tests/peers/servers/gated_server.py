"""A gated MCP server on the official Python MCP SDK 2.x, for tests/suite/reload.rs.

    python gated_server.py PORT EVENTS_FILE RELEASE_FILE [--list-gate FILE]

Serves streamable HTTP on 127.0.0.1:PORT/mcp as a session-era-only server (as mrtr_server.py's
`--legacy-only`): `server/discover` and any request sent in the 2026-07-28 era (its
`MCP-Protocol-Version` header) are refused as a session-era server refuses a request without a
session (HTTP 400, -32600), so a client must `initialize`, gets an `Mcp-Session-Id`, and ends
the session with `DELETE /mcp`. That makes every new upstream session the gateway opens
visible. Tools:

  hold(tag)   records that it started, then blocks until RELEASE_FILE exists; answers
              "released <tag>"
  quick(tag)  answers "quick <tag>" at once

With `--list-gate FILE`, a `tools/list` that arrives while FILE exists is held until FILE is
removed (a server slow to list its tools, on demand).

Appends one JSON line per event to EVENTS_FILE, in the order they happen, so a test can tell
what the server saw without a clock:

  {"event": "request", "http": "POST"|"GET"|"DELETE", "rpc": METHOD|null, "tool": NAME|null,
   "session": MCP-SESSION-ID|null}                  every request to /mcp, when it arrives
  {"event": "session_issued", "session": ID}        an `initialize` answer's Mcp-Session-Id
  {"event": "hold_started", "tag": TAG}             a `hold` call reached the tool
  {"event": "hold_released", "tag": TAG}            ... and is about to answer
  {"event": "list_held"}                            a `tools/list` waits for the list gate

Prints `READY <port>` on stdout (flushed) once listening.
"""

import argparse
import json
import os
import sys

import anyio
import uvicorn

from mcp.server.mcpserver import MCPServer

EVENTS = ""
RELEASE = ""
LIST_GATE = None

server = MCPServer("gated-peer")

# What a session-era server answers a request without a session.
NO_SESSION = {"code": -32600, "message": "Bad Request: No valid session ID provided"}


def record(event: dict) -> None:
    with open(EVENTS, "a", encoding="utf-8") as out:
        out.write(json.dumps(event) + "\n")
        out.flush()


@server.tool()
async def hold(tag: str) -> str:
    """Blocks until the test releases it."""
    record({"event": "hold_started", "tag": tag})
    while not os.path.exists(RELEASE):
        await anyio.sleep(0.02)
    record({"event": "hold_released", "tag": tag})
    return f"released {tag}"


@server.tool()
def quick(tag: str) -> str:
    """Answers at once."""
    return f"quick {tag}"


class Recording:
    """ASGI middleware: records each request (read whole, then replayed to the SDK's app) and
    each new session an answer issues; refuses the 2026-07-28 era."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        chunks, more = [], True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        rpc, tool, parsed = None, None, None
        try:
            parsed = json.loads(body) if body else None
            if isinstance(parsed, dict):
                rpc = parsed.get("method")
                if rpc == "tools/call":
                    tool = (parsed.get("params") or {}).get("name")
        except ValueError:
            pass
        record({"event": "request", "http": scope["method"], "rpc": rpc, "tool": tool,
                "session": headers.get("mcp-session-id")})
        modern = headers.get("mcp-protocol-version") == "2026-07-28"
        if rpc == "server/discover" or modern:
            error = {"jsonrpc": "2.0", "id": parsed.get("id") if isinstance(parsed, dict) else None,
                     "error": NO_SESSION}
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": json.dumps(error).encode()})
            return
        if rpc == "tools/list" and LIST_GATE and os.path.exists(LIST_GATE):
            record({"event": "list_held"})
            while os.path.exists(LIST_GATE):
                await anyio.sleep(0.02)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        async def watch(message):
            if message["type"] == "http.response.start":
                for k, v in message.get("headers", []):
                    if k.decode("latin-1").lower() == "mcp-session-id" and rpc == "initialize":
                        record({"event": "session_issued", "session": v.decode("latin-1")})
            await send(message)

        await self.app(scope, replay, watch)


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def serve(port: int) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(Recording(app), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    await _Uvicorn(config).serve()


def main() -> None:
    global EVENTS, RELEASE, LIST_GATE
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("events")
    parser.add_argument("release")
    parser.add_argument("--list-gate")
    args = parser.parse_args()
    EVENTS, RELEASE, LIST_GATE = args.events, args.release, args.list_gate
    anyio.run(serve, args.port)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
