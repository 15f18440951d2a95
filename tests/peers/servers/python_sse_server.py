"""A Python MCP SDK 2.x server on the 2024-11-05 HTTP+SSE transport, for the gateway's tests.

Usage: python_sse_server.py PORT [--token TOKEN]

Runs in tests/peers/.venv. Serves the SDK's SSE app (`MCPServer.sse_app()`, what
`.run("sse", ...)` serves): `GET http://127.0.0.1:PORT/sse` opens the stream, whose `endpoint`
event names `/messages/?session_id=...` for the POSTs. Tools: `add(a, b) -> int`,
`shout(text) -> str`, `blob(size) -> str` (`size` times "x", for size limits) and
`count_up(steps) -> str` (reports progress 1..steps of steps, then "counted to <steps>").
`--token`: every request needs `Authorization: Bearer TOKEN`, or gets HTTP 401.

Readiness: prints `READY <port>` on stdout (flushed) once the socket is listening; uvicorn's
own log goes to stderr.
"""

import argparse

import anyio
import uvicorn
from starlette.responses import PlainTextResponse

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("python-sse-peer")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


@server.tool()
def blob(size: int) -> str:
    """A text of `size` x characters."""
    return "x" * size


@server.tool()
async def count_up(steps: int, ctx: Context) -> str:
    """Reports progress 1..steps, then answers."""
    for i in range(1, steps + 1):
        await ctx.report_progress(i, steps, f"step {i}")
    return f"counted to {steps}"


def require_token(app, token):
    async def guarded(scope, receive, send):
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {token}".encode():
                await PlainTextResponse("unauthorized", status_code=401)(scope, receive, send)
                return
        await app(scope, receive, send)

    return guarded


class _Uvicorn(uvicorn.Server):
    """Announces readiness after the listening socket is bound."""

    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def _serve(args: argparse.Namespace) -> None:
    app = server.sse_app(host="127.0.0.1")
    if args.token is not None:
        app = require_token(app, args.token)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
    await _Uvicorn(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--token", default=None)
    anyio.run(_serve, parser.parse_args())


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        pass
