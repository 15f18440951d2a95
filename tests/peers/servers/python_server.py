"""A Python MCP SDK (2.x) server for the gateway's integration tests.

Usage: python_server.py PORT [--stateless] [--json-response] [--session-idle-timeout SECONDS]

Serves streamable HTTP on 127.0.0.1:PORT/mcp with two tools, `add(a, b) -> int` and
`shout(text) -> str`. SDK 2.x answers both protocol eras on the same endpoint, routed by the
`MCP-Protocol-Version` request header:
  * session era (2024-11-05 .. 2025-11-25): `initialize` handshake, `Mcp-Session-Id`, answers
    as SSE (`event: message` / `data: {...}`); unknown or expired session -> 404.
  * stateless era (2026-07-28): one self-contained POST, `params._meta` envelope plus the
    `Mcp-Method` (and, for tools/call, `Mcp-Name`) headers; answers as plain JSON.
Options: `--stateless` (no sessions in the session era), `--json-response` (JSON instead of SSE
in the session era), `--session-idle-timeout` (seconds before an idle session expires; the
SDK's default is 1800).

Readiness: prints `READY <port>` on stdout (flushed) once the socket is listening; uvicorn's
own log goes to stderr.
"""

import argparse
import sys

import anyio
import uvicorn

from mcp.server.mcpserver import MCPServer

server = MCPServer("python-peer")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def shout(text: str) -> str:
    """Upper-case a text."""
    return text.upper()


class _Uvicorn(uvicorn.Server):
    """Announces readiness after the listening socket is bound (lifespan startup runs earlier)."""

    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def _serve(args: argparse.Namespace) -> None:
    options = {}
    if args.session_idle_timeout is not None:
        options["session_idle_timeout"] = args.session_idle_timeout
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        json_response=args.json_response,
        stateless_http=args.stateless,
        host="127.0.0.1",
        **options,
    )
    tls = {"ssl_certfile": args.tls[0], "ssl_keyfile": args.tls[1]} if args.tls else {}
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning", **tls)
    await _Uvicorn(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--stateless", action="store_true")
    parser.add_argument("--json-response", action="store_true")
    parser.add_argument("--session-idle-timeout", type=float, default=None)
    parser.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve HTTPS with this certificate")
    args = parser.parse_args()
    anyio.run(_serve, args)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
