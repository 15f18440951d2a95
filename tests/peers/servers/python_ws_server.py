"""A Python MCP SDK 1.x WebSocket server for the gateway's integration tests.

Usage: python_ws_server.py PORT [--token TOKEN] [--tls CERT KEY]

Runs in tests/peers/.venv-ws (SDK 1.x: WebSocket was dropped in 2.x). Serves the SDK's own
WebSocket server transport (`mcp.server.websocket.websocket_server`, subprotocol `mcp`) on
ws://127.0.0.1:PORT/ws, in front of a FastMCP app with four tools: `add(a, b) -> int`,
`shout(text) -> str`, `blob(size) -> str` (`size` times "x", for size limits) and
`count_up(steps) -> str` (reports progress 1..steps of steps, then "counted to <steps>"); the
resource `ws://peer/notes/today`, the template `ws://peer/notes/{day}` and the prompt
`greet(name)`.
`--token`: the upgrade needs `Authorization: Bearer TOKEN`; without it the server answers
HTTP 401 (the ASGI WebSocket denial response), before any WebSocket is accepted.
`--tls CERT KEY`: serve wss:// with that certificate chain and key (PEM files).

Readiness: prints `READY <port>` on stdout (flushed) once the socket is listening; uvicorn's
own log goes to stderr.
"""

import argparse
import warnings

import anyio
import uvicorn
from starlette.responses import PlainTextResponse
from starlette.websockets import WebSocket

from mcp.server.fastmcp import Context, FastMCP

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from mcp.server.websocket import websocket_server

mcp = FastMCP("python-ws-peer")


@mcp.resource("ws://peer/notes/today", mime_type="text/plain")
def notes_today() -> str:
    """Today's notes."""
    return "Notes of today, over a WebSocket."


@mcp.resource("ws://peer/notes/{day}", mime_type="text/plain")
def notes_of(day: str) -> str:
    """The notes of a day."""
    return f"Notes of {day}, over a WebSocket."


@mcp.prompt()
def greet(name: str) -> str:
    """A greeting for someone."""
    return f"Say hello to {name}."


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@mcp.tool()
def blob(size: int) -> str:
    """A text of `size` x characters."""
    return "x" * size


@mcp.tool()
async def count_up(steps: int, ctx: Context) -> str:
    """Reports progress 1..steps, then answers."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted to {steps}"


def make_app(token):
    async def app(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] == "websocket" and scope["path"] == "/ws":
            if token is not None:
                headers = dict(scope.get("headers") or [])
                if headers.get(b"authorization") != f"Bearer {token}".encode():
                    denial = PlainTextResponse("unauthorized", status_code=401)
                    await WebSocket(scope, receive, send).send_denial_response(denial)
                    return
            server = mcp._mcp_server
            async with websocket_server(scope, receive, send) as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        await PlainTextResponse("not found", status_code=404)(scope, receive, send)

    return app


class _Uvicorn(uvicorn.Server):
    """Announces readiness after the listening socket is bound."""

    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def _serve(args: argparse.Namespace) -> None:
    config = uvicorn.Config(
        make_app(args.token),
        host="127.0.0.1",
        port=args.port,
        log_level="warning",
        ws="websockets-sansio",
        # The gateway's keepalive is under test: the server's own pings stay out of the way.
        ws_ping_interval=None,
        ssl_certfile=args.tls[0] if args.tls else None,
        ssl_keyfile=args.tls[1] if args.tls else None,
    )
    await _Uvicorn(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--token", default=None)
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), default=None)
    anyio.run(_serve, parser.parse_args())


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
