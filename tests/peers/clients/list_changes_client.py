"""The official Python MCP SDK (2.x) client waiting for a tool list change, for the gateway's tests.

Usage: list_changes_client.py URL MODE

MODE "legacy": the session era — `initialize`, then the SDK opens the GET stream of its
session by itself; `notifications/tools/list_changed` reaches the client's message handler.
MODE "2026-07-28": the modern era — `Client.listen(tools_list_changed=True)`
(`subscriptions/listen`); the change arrives as a `ToolsListChanged` event.

Prints JSON lines on stdout (flushed):
  {"event": "connected", "tools": [names]}      after the first tools/list (legacy), or
  {"event": "listening", "tools": [names]}      once the subscription is acknowledged (modern);
  {"event": "changed", "tools": [names]}         after the first list change, with the tools
                                                  listed right after it;
then exits 0. Exits 1 with the error on stderr if no change arrives within 120 s.
"""

import json
import sys

import anyio

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged


def emit(event: str, tools) -> None:
    print(json.dumps({"event": event, "tools": sorted(t.name for t in tools)}), flush=True)


async def legacy(url: str) -> None:
    changed = anyio.Event()

    async def on_message(message) -> None:
        method = getattr(message, "method", None) or getattr(getattr(message, "root", None), "method", None)
        if method == "notifications/tools/list_changed":
            changed.set()

    async with Client(streamable_http_client(url), mode="legacy", cache=None, message_handler=on_message) as client:
        emit("connected", (await client.list_tools()).tools)
        with anyio.fail_after(120):
            await changed.wait()
        emit("changed", (await client.list_tools()).tools)


async def modern(url: str, mode: str) -> None:
    async with Client(streamable_http_client(url), mode=mode, cache=None) as client:
        async with client.listen(tools_list_changed=True) as subscription:
            emit("listening", (await client.list_tools()).tools)
            with anyio.fail_after(120):
                async for event in subscription:
                    if isinstance(event, ToolsListChanged):
                        break
        emit("changed", (await client.list_tools()).tools)


async def main(argv: list[str]) -> None:
    if len(argv) != 2:
        raise SystemExit("usage: list_changes_client.py URL MODE")
    url, mode = argv
    if mode == "legacy":
        await legacy(url)
    else:
        await modern(url, mode)


if __name__ == "__main__":
    try:
        anyio.run(main, sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - report any failure to the test
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
