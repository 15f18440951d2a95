"""FastMCP's client and LangChain's MCP adapters reading resources and prompts, unchanged, for
the gateway's tests (runs in tests/peers/.venv-lambda).

Usage: framework_surface_client.py URL URI PROMPT JSON_PROMPT_ARGUMENTS

Prints ONE JSON line:
    {"fastmcp": {"resources": [uris], "prompts": [names], "read": [texts], "prompt": [texts]},
     "langchain": {"resources": [{"source": uri, "data": text}], "prompt": [contents]}}
FastMCP (`fastmcp.Client`) lists the resources and prompts, reads URI and gets PROMPT;
LangChain (`MultiServerMCPClient`: `get_resources`, i.e. `load_mcp_resources`, and
`get_prompt`, i.e. `load_mcp_prompt`) loads URI as a blob and PROMPT as messages. Any failure
exits 1 with the error on stderr.
"""

import asyncio
import json
import sys

from fastmcp import Client
from langchain_mcp_adapters.client import MultiServerMCPClient


async def main(argv: list[str]) -> None:
    if len(argv) != 4:
        raise SystemExit(__doc__)
    url, uri, prompt, raw = argv
    arguments = json.loads(raw)
    async with Client(url) as client:
        resources = await client.list_resources()
        prompts = await client.list_prompts()
        read = await client.read_resource(uri)
        got = await client.get_prompt(prompt, arguments)
    fastmcp = {
        "resources": [str(r.uri) for r in resources],
        "prompts": [p.name for p in prompts],
        "read": [getattr(c, "text", None) for c in read],
        "prompt": [getattr(m.content, "text", None) for m in got.messages],
    }
    langchain_client = MultiServerMCPClient({"gateway": {"url": url, "transport": "streamable_http"}})
    blobs = await langchain_client.get_resources("gateway", uris=[uri])
    messages = await langchain_client.get_prompt("gateway", prompt, arguments=arguments)
    langchain = {
        "resources": [{"source": str(b.metadata.get("uri", b.source)), "data": b.as_string()} for b in blobs],
        "prompt": [m.content for m in messages],
    }
    print(json.dumps({"fastmcp": fastmcp, "langchain": langchain}))


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - report anything, exit 1
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
