"""A Python MCP SDK (2.x) server that takes resource subscriptions and records them, for the
gateway's subscription tests (the reference "everything" server cannot say how many
`resources/subscribe` it received).

Usage: subscribing_server.py stdio
       subscribing_server.py http PORT

Resources: `watch://a`, `watch://b`, `watch://c` and `watch://secret` (text).
Capabilities: `resources.subscribe` (the SDK declares it because the server handles
`resources/subscribe`).

Every `resources/subscribe` and `resources/unsubscribe` it answers appends a line
`subscribe <uri>` / `unsubscribe <uri>` to the file named by the environment variable
SUBSCRIBING_LOG (when set), so a test can count what the upstream saw.

Tool:
  touch(uri)  says the resource URI was updated: `notifications/resources/updated` on the
              session (stdio, or the GET stream of a streamable-HTTP session) and to the
              server's `subscriptions/listen` streams (2026-07-28) — whether or not anyone
              subscribed, so a test can see the gateway drop what nobody asked for;
  crash()     exits the process at once (a test of what the gateway does after a restart).

`http` serves streamable HTTP on 127.0.0.1:PORT/mcp and prints `READY <port>` once listening.
"""

import os
import sys

import anyio
import uvicorn

from mcp import types
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("subscribing")
LOG = os.environ.get("SUBSCRIBING_LOG")


def _log(line: str) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


def _text(name: str):
    def read() -> str:
        return f"the content of {name}"

    read.__name__ = f"read_{name}"
    return read


for _name in ("a", "b", "c", "secret"):
    server.resource(f"watch://{_name}", name=f"watch-{_name}", mime_type="text/plain")(_text(_name))


async def _subscribe(ctx, params: types.SubscribeRequestParams) -> types.EmptyResult:
    _log(f"subscribe {params.uri}")
    return types.EmptyResult()


async def _unsubscribe(ctx, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    _log(f"unsubscribe {params.uri}")
    return types.EmptyResult()


server._lowlevel_server.add_request_handler("resources/subscribe", types.SubscribeRequestParams, _subscribe)
server._lowlevel_server.add_request_handler("resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe)


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Say the resource URI was updated."""
    await ctx.notify_resource_updated(uri)
    try:
        await ctx.request_context.session.send_resource_updated(uri)
    except Exception:  # noqa: BLE001 - a modern single exchange has no session channel
        pass
    return f"touched {uri}"


@server.tool()
def crash() -> str:
    """Exit the process at once, without answering."""
    os._exit(3)


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def _serve_http(port: int) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await _Uvicorn(config).serve()


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "stdio":
        server.run("stdio")
    elif len(sys.argv) == 3 and sys.argv[1] == "http":
        anyio.run(_serve_http, int(sys.argv[2]))
    else:
        raise SystemExit("usage: subscribing_server.py stdio | http PORT")
