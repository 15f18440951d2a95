"""A Python MCP SDK (2.x) session-era server with resumable answer streams (SEP-1699).

Usage: resumable_server.py PORT RETRY_MS

Streamable HTTP on 127.0.0.1:PORT/mcp, sessions on, SSE answers, an in-memory event store
and `retry_interval=RETRY_MS`: every answer stream starts with a priming event (an id, the
retry time, no data). Its `server/discover` lists only session-era versions, so a client
following the 2026-07-28 backward-compatibility rule initializes it (2025-11-25).

Tools:
  * `slow_echo(text)`: closes its own answer stream (the SDK's `close_sse_stream`, what a
    server does during a deploy), waits 300 ms, then answers `text`. The answer is stored in
    the event store and reaches a client that reconnects with GET + Last-Event-ID.
  * `echo(text)`: answers at once.

Readiness: prints `READY <port>` on stdout (flushed) once listening.
"""

import sys

import anyio
import uvicorn

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventMessage, EventStore

server = MCPServer("python-resumable-peer")


class MemoryEventStore(EventStore):
    """Every event of every stream, in order (a test server's lifetime is short)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []  # (event id, stream id, message)

    async def store_event(self, stream_id, message):
        event_id = f"{stream_id}:{len(self.events)}"
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback):
        index = next((i for i, e in enumerate(self.events) if e[0] == last_event_id), None)
        if index is None:
            return None
        stream_id = self.events[index][1]
        for event_id, stream, message in self.events[index + 1 :]:
            if stream == stream_id and message is not None:
                await send_callback(EventMessage(message, event_id))
        return stream_id


@server.tool()
async def slow_echo(text: str, ctx: Context) -> str:
    """Echo a text after closing the answer stream once."""
    await ctx.close_sse_stream()
    await anyio.sleep(0.3)
    return text


@server.tool()
def echo(text: str) -> str:
    """Echo a text."""
    return text


async def discover(ctx, params) -> types.DiscoverResult:
    return types.DiscoverResult(
        supported_versions=["2025-11-25", "2025-06-18"],
        capabilities=types.ServerCapabilities(tools=types.ToolsCapability()),
    )


server._lowlevel_server.add_request_handler("server/discover", types.RequestParams, discover)


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def _serve(port: int, retry_ms: int) -> None:
    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        event_store=MemoryEventStore(),
        retry_interval=retry_ms,
        host="127.0.0.1",
    )
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await _Uvicorn(config).serve()


if __name__ == "__main__":
    try:
        anyio.run(_serve, int(sys.argv[1]), int(sys.argv[2]))
    except KeyboardInterrupt:
        sys.exit(0)
