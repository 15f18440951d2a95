"""The official Python MCP SDK (2.3) client as an MCP Apps host (or as a text-only client), for
the gateway's MCP Apps tests (tests/suite/apps.rs).

Usage: apps_client.py URL MODE (apps | text) [TOOL]
MODE is the SDK's connect mode: "legacy" (initialize handshake) or "2026-07-28". With `apps` the
client advertises `io.modelcontextprotocol/ui` with `mimeTypes: ["text/html;profile=mcp-app"]`
(`mcp.client.extension.advertise`), as a host that renders apps does; with `text` it advertises
nothing.

Lists every tool, reads the `ui://` resource each tool's `_meta.ui.resourceUri` names, calls TOOL
(default: none) with no arguments, and prints ONE JSON line:
    {"tools": [{"name", "meta"}...], "extensions": <the server's declared extensions or null>,
     "reads": {tool name: {"uri", "mimeType", "meta", "text"} | {"error": message}},
     "call": {"text", "isError"} | {"error": message} | null}
A failure outside a read or the call exits 1 with the error on stderr.
"""

import asyncio
import json
import sys

from mcp.client.client import Client
from mcp.client.extension import advertise
from mcp.client.streamable_http import streamable_http_client

APPS = "io.modelcontextprotocol/ui"
MIME = "text/html;profile=mcp-app"


async def every_tool(client) -> list:
    tools, cursor = [], None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


async def main(argv: list[str]) -> None:
    if len(argv) not in (3, 4):
        raise SystemExit(__doc__)
    url, mode, host = argv[:3]
    tool = argv[3] if len(argv) == 4 else None
    extensions = [advertise(APPS, {"mimeTypes": [MIME]})] if host == "apps" else []
    async with Client(streamable_http_client(url), mode=mode, cache=None, extensions=extensions) as client:
        tools = await every_tool(client)
        reads = {}
        for t in tools:
            uri = ((t.meta or {}).get("ui") or {}).get("resourceUri")
            if not uri:
                continue
            try:
                read = await client.read_resource(uri)
                content = read.contents[0]
                reads[t.name] = {
                    "uri": str(content.uri),
                    "mimeType": content.mime_type,
                    "meta": content.meta,
                    "text": getattr(content, "text", None),
                }
            except Exception as error:  # noqa: BLE001 - reported per read
                reads[t.name] = {"error": str(error)}
        call = None
        if tool:
            try:
                result = await client.call_tool(tool, {})
                call = {"text": result.content[0].text if result.content else None, "isError": result.is_error}
            except Exception as error:  # noqa: BLE001 - reported
                call = {"error": str(error)}
        capabilities = getattr(client, "server_capabilities", None)
        declared = capabilities.extensions if capabilities is not None else None
        print(json.dumps({
            "tools": [{"name": t.name, "meta": t.meta} for t in tools],
            "extensions": declared,
            "reads": reads,
            "call": call,
        }))


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - report anything, exit 1
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
