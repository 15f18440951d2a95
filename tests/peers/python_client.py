"""The official Python MCP SDK (2.x) client, talking to the gateway.

Usage: python_client.py URL MODE TOOL JSON_ARGUMENTS
MODE is the SDK's connect mode: "legacy" (initialize handshake), "auto" (server/discover,
falling back to initialize) or a modern protocol version such as "2026-07-28".
Prints one JSON line: {"tools": [...names], "result": <CallToolResult as JSON>}; exits 1 with
the error on stderr on any failure.
"""

import asyncio
import json
import sys

from mcp.client.client import Client


async def main() -> None:
    url, mode, tool, arguments = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    async with Client(url, mode=mode) as client:
        listed = await client.list_tools()
        result = await client.call_tool(tool, arguments)
        print(
            json.dumps(
                {
                    "tools": [t.name for t in listed.tools],
                    "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
                }
            )
        )


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except Exception as error:  # noqa: BLE001 - report any failure to the test
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
