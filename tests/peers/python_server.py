"""A Python MCP SDK (2.x) server for the gateway's integration tests.

Usage: python_server.py PORT [--stateless]
Serves streamable HTTP on 127.0.0.1:PORT/mcp with two tools, `add` and `shout`. SDK 2.x
answers both protocol eras: session-era clients (initialize, Mcp-Session-Id) and the
stateless 2026-07-28 revision.
"""

import sys

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


if __name__ == "__main__":
    port = int(sys.argv[1])
    server.run(
        "streamable-http",
        host="127.0.0.1",
        port=port,
        stateless_http="--stateless" in sys.argv,
    )
