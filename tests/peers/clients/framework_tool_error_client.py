"""LangChain's MCP adapters calling one tool through the gateway, for the gateway's tests: what
the model is shown when the call is refused (runs in tests/peers/.venv-lambda).

Usage: framework_tool_error_client.py URL TOOL JSON_ARGUMENTS

Loads the gateway's tools with `MultiServerMCPClient.get_tools()` (streamable HTTP), calls TOOL
as a model's tool call would, and prints ONE JSON line:
    {"tools": [names], "outcome": "result" | "tool_error" | "protocol_error", "text": "..."}
`tool_error`: the adapter raised `ToolException` (the tool answered `isError: true`), whose text
an agent hands the model as the tool's observation; `protocol_error`: a JSON-RPC error surfaced
as another exception. Anything else failing exits 1 with the error on stderr.
"""

import asyncio
import json
import sys

from langchain_core.tools import ToolException
from langchain_mcp_adapters.client import MultiServerMCPClient


async def main(argv: list[str]) -> None:
    if len(argv) != 3:
        raise SystemExit(__doc__)
    url, name, raw = argv
    arguments = json.loads(raw)
    client = MultiServerMCPClient({"gateway": {"url": url, "transport": "streamable_http"}})
    tools = await client.get_tools()
    tool = next(t for t in tools if t.name == name)
    try:
        out = await tool.ainvoke(arguments)
        outcome, text = "result", out if isinstance(out, str) else json.dumps(out, default=str)
    except ToolException as e:
        outcome, text = "tool_error", str(e)
    except Exception as e:  # noqa: BLE001 - any other exception is how a JSON-RPC error surfaces
        outcome, text = "protocol_error", f"{type(e).__name__}: {e}"
    print(json.dumps({"tools": sorted(t.name for t in tools), "outcome": outcome, "text": text}))


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except Exception as e:  # noqa: BLE001
        print(f"{type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
