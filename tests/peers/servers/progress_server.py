"""A Python MCP SDK (2.x) server whose tools report progress, for the gateway's progress-relay
and cancellation tests.

Usage: progress_server.py PORT

Streamable HTTP on 127.0.0.1:PORT/mcp (both eras; answers stream as SSE so notifications
reach the client). Tools:
  * `count_up(steps, delay_ms)`: reports progress 1..steps of steps, `delay_ms` apart, then
    returns "counted to <steps>";
  * `progress_forever(interval_ms, pad=0)`: reports ever-increasing progress until cancelled,
    each notification's `message` `pad` bytes long (to fill a reader's buffers quickly);
  * `peer_stats()`: {"started": n, "cancelled": n, "finished": n} over `progress_forever` and
    `count_up` calls, where `cancelled` counts calls whose task the SDK cancelled (the client
    closed the stream or sent notifications/cancelled).
Prints `READY <port>` once listening.
"""

import argparse

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("progress-peer")
stats = {"started": 0, "cancelled": 0, "finished": 0}


async def _tracked(work):
    stats["started"] += 1
    try:
        result = await work()
    except anyio.get_cancelled_exc_class():
        stats["cancelled"] += 1
        raise
    stats["finished"] += 1
    return result


@server.tool(description="Reports progress 1..steps, then answers")
async def count_up(steps: int, delay_ms: int, ctx: Context) -> str:
    async def work():
        for i in range(1, steps + 1):
            await anyio.sleep(delay_ms / 1000)
            await ctx.report_progress(i, steps, f"step {i}")
        return f"counted to {steps}"

    return await _tracked(work)


@server.tool(description="Reports progress until cancelled; never answers")
async def progress_forever(interval_ms: int, ctx: Context, pad: int = 0) -> str:
    message = "x" * pad if pad else None

    async def work():
        i = 0
        while True:
            i += 1
            await ctx.report_progress(i, None, message)
            await anyio.sleep(interval_ms / 1000)

    return await _tracked(work)


@server.tool(description="What the server saw")
def peer_stats() -> dict:
    return dict(stats)


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
    anyio.run(_Uvicorn(config).serve)


if __name__ == "__main__":
    main()
