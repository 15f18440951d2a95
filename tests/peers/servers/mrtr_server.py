"""A Python MCP SDK (2.3) server whose tools need the client mid-call, for the multi-round-trip
tests (tests/mrtr.rs).

Usage: mrtr_server.py PORT [--modern-only | --legacy-only]

`place_order(item)` asks the user to confirm (a `Resolve` resolver returning `Elicit`);
`summarise_reviews(title)` (read-only) asks the client's model (`Sample`). The SDK follows the era the
client negotiated: on 2026-07-28 the first round answers `resultType: "input_required"` with
`inputRequests` and a `requestState`, and the retry carrying `inputResponses` completes; on the
session era it sends `elicitation/create` / `sampling/createMessage` on the call's stream.

With `--modern-only` it is a 2026-07-28-only server: a session-era `initialize` is refused
with a JSON-RPC error (-32022, unsupported protocol version), so a session-era client can only
reach its tools through something that speaks the modern era to it.

With `--legacy-only` it is a session-era-only server: `server/discover` and any request sent in
the 2026-07-28 era (its `MCP-Protocol-Version` header) are refused as a session-era server
refuses a request without a session (HTTP 400, -32600 "Bad Request: No valid session ID
provided"), so a client must `initialize`, declare its capabilities there, and be asked with
requests on the call's stream.

Control (GET, no MCP): /control/rounds -> every `tools/call` round the server saw, in order:
{"tool", "protocolVersion", "clientCapabilities", "clientInfo", "inputResponses": bool,
"requestState": bool}; /control/answers -> every JSON-RPC response a client POSTed to the
server's own requests, in order: {"result": ..., "error": ...} (one of them null).
Prints `READY <port>` once listening.
"""

import argparse
import json
import sys
from typing import Annotated

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.resolve import Elicit, Resolve, Sample
from mcp_types import CreateMessageResult, SamplingMessage, TextContent, ToolAnnotations
from pydantic import BaseModel

server = MCPServer("mrtr-peer")
ROUNDS: list[dict] = []
ANSWERS: list[dict] = []
NO_SESSION = {"code": -32600, "message": "Bad Request: No valid session ID provided"}


class Confirmation(BaseModel):
    confirm: bool
    name: str


def ask_to_confirm(item: str) -> Elicit[Confirmation]:
    return Elicit(f"Place the order for {item}?", Confirmation)


def ask_the_model(title: str) -> Sample:
    message = SamplingMessage(role="user", content=TextContent(type="text", text=f"Summarise reviews of {title}"))
    return Sample([message], max_tokens=50)


@server.tool()
def place_order(item: str, confirmation: Annotated[Confirmation, Resolve(ask_to_confirm)]) -> str:
    """Place an order once the shopper confirms it."""
    if not confirmation.confirm:
        return f"order for {item} not placed: {confirmation.name} said no"
    return f"order for {item} placed, confirmed by {confirmation.name}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def summarise_reviews(title: str, sampled: Annotated[CreateMessageResult, Resolve(ask_the_model)]) -> str:
    """Summarise a title's reviews with the client's model."""
    content = sampled.content
    return f"{title}: {getattr(content, 'text', content)}"


class RecordRounds:
    """Pure ASGI middleware: records each tools/call round's `_meta` and retry fields."""

    def __init__(self, app, modern_only: bool, legacy_only: bool):
        self.app = app
        self.modern_only = modern_only
        self.legacy_only = legacy_only

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] in ("/control/rounds", "/control/answers"):
            body = json.dumps(ROUNDS if scope["path"] == "/control/rounds" else ANSWERS).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            return await send({"type": "http.response.body", "body": body})
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = json.loads(body) if body else None
        except ValueError:
            request = None
        if self.modern_only and isinstance(request, dict) and request.get("method") == "initialize":
            error = {"jsonrpc": "2.0", "id": request.get("id"), "error": {
                "code": -32022, "message": "this server speaks 2026-07-28 only",
                "data": {"supported": ["2026-07-28"]}}}
            await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]})
            return await send({"type": "http.response.body", "body": json.dumps(error).encode()})
        headers = dict(scope.get("headers") or [])
        modern = headers.get(b"mcp-protocol-version") == b"2026-07-28"
        if self.legacy_only and isinstance(request, dict) and (request.get("method") == "server/discover" or modern):
            error = {"jsonrpc": "2.0", "id": request.get("id"), "error": NO_SESSION}
            await send({"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"application/json")]})
            return await send({"type": "http.response.body", "body": json.dumps(error).encode()})
        if isinstance(request, dict) and "method" not in request and "id" in request:
            ANSWERS.append({"result": request.get("result"), "error": request.get("error")})
        if isinstance(request, dict) and request.get("method") == "tools/call":
            params = request.get("params") or {}
            meta = params.get("_meta") or {}
            ROUNDS.append({
                "tool": params.get("name"),
                "protocolVersion": meta.get("io.modelcontextprotocol/protocolVersion"),
                "clientCapabilities": meta.get("io.modelcontextprotocol/clientCapabilities"),
                "clientInfo": meta.get("io.modelcontextprotocol/clientInfo"),
                "inputResponses": "inputResponses" in params,
                "requestState": "requestState" in params,
            })
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def _serve(port: int, modern_only: bool, legacy_only: bool) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(RecordRounds(app, modern_only, legacy_only), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    await _Uvicorn(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    era = parser.add_mutually_exclusive_group()
    era.add_argument("--modern-only", action="store_true")
    era.add_argument("--legacy-only", action="store_true")
    args = parser.parse_args()
    anyio.run(_serve, args.port, args.modern_only, args.legacy_only)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
