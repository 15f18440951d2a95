"""The official Python MCP SDK (2.x) client over streamable HTTP, for the gateway's tests.

Usage: python_client.py URL TOOL JSON_ARGUMENTS          (mode "legacy")
       python_client.py URL MODE TOOL JSON_ARGUMENTS
MODE is the SDK's connect mode: "legacy" (initialize handshake, Mcp-Session-Id), "auto"
(server/discover, falling back to initialize) or a modern protocol version such as
"2026-07-28" (stateless per-request envelope, no handshake).

Connects to URL with `mcp.client.streamable_http.streamable_http_client`, lists the tools (every
page, following nextCursor as the SDK's `list_tools(cursor=...)` lets an application do), calls
TOOL with the JSON arguments and prints ONE JSON line on stdout:
    {"tools": [names...], "pages": N, "result": <CallToolResult as JSON, by alias, without nulls>}
A tool error (`isError: true`) is a result, not a failure. Any failure (connection, protocol,
JSON-RPC error) exits 1 with the error on stderr.
"""

import asyncio
import json
import sys

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

USAGE = "usage: python_client.py URL [MODE] TOOL JSON_ARGUMENTS"


def parse(argv: list[str]) -> tuple[str, str, str, dict]:
    if len(argv) == 3:
        url, tool, raw = argv
        mode = "legacy"
    elif len(argv) == 4:
        url, mode, tool, raw = argv
    else:
        raise SystemExit(USAGE)
    arguments = json.loads(raw)
    if not isinstance(arguments, dict):
        raise ValueError(f"JSON_ARGUMENTS must be a JSON object, got {raw!r}")
    return url, mode, tool, arguments


async def main(argv: list[str]) -> None:
    url, mode, tool, arguments = parse(argv)
    # cache=None: every list/call reaches the server (the SDK caches 2026-07-28 results by default).
    async with Client(streamable_http_client(url), mode=mode, cache=None) as client:
        listed = await client.list_tools()
        names, pages = [t.name for t in listed.tools], 1
        while listed.next_cursor:
            listed = await client.list_tools(cursor=listed.next_cursor)
            names.extend(t.name for t in listed.tools)
            pages += 1
        result = await client.call_tool(tool, arguments)
    print(
        json.dumps(
            {
                "tools": names,
                "pages": pages,
                "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - report any failure to the test
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]  # anyio task groups wrap the real cause
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
