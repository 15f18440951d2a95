"""The official Python MCP SDK (2.x) client reading a server's resources, prompts and
completions over streamable HTTP, for the gateway's tests.

Usage: surface_client.py URL MODE URI PROMPT JSON_PROMPT_ARGUMENTS
MODE is the SDK's connect mode: "legacy" (initialize handshake), "auto" (server/discover, falling
back to initialize) or a modern protocol version such as "2026-07-28".

Lists the resources, resource templates and prompts (every page), reads URI, gets PROMPT with the
arguments, and asks completion of the prompt's first argument (value "") and prints ONE JSON line:
    {"resources": [uris...], "templates": [uriTemplates...], "prompts": [names...],
     "read": <ReadResourceResult>, "prompt": <GetPromptResult>, "completion": <CompleteResult>,
     "capabilities": <the server's declared capabilities>}
Any failure (connection, protocol, JSON-RPC error) exits 1 with the error on stderr.
"""

import asyncio
import json
import sys

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import PromptReference

USAGE = "usage: surface_client.py URL MODE URI PROMPT JSON_PROMPT_ARGUMENTS"


def dump(model) -> dict:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


async def every_page(method, key: str) -> list:
    items, cursor = [], None
    while True:
        page = await method(cursor=cursor)
        items.extend(getattr(page, key))
        cursor = page.next_cursor
        if not cursor:
            return items


async def main(argv: list[str]) -> None:
    if len(argv) != 5:
        raise SystemExit(USAGE)
    url, mode, uri, prompt, raw = argv
    arguments = json.loads(raw)
    async with Client(streamable_http_client(url), mode=mode, cache=None) as client:
        resources = await every_page(client.list_resources, "resources")
        templates = await every_page(client.list_resource_templates, "resource_templates")
        prompts = await every_page(client.list_prompts, "prompts")
        read = await client.read_resource(uri)
        got = await client.get_prompt(prompt, arguments)
        listed = next((p for p in prompts if p.name == prompt), None)
        first = listed.arguments[0].name if listed and listed.arguments else "value"
        completion = await client.complete(PromptReference(type="ref/prompt", name=prompt), {"name": first, "value": ""})
        capabilities = client.server_capabilities if hasattr(client, "server_capabilities") else None
        print(json.dumps({
            "resources": [r.uri for r in resources],
            "templates": [t.uri_template for t in templates],
            "prompts": [p.name for p in prompts],
            "read": dump(read),
            "prompt": dump(got),
            "completion": dump(completion),
            "capabilities": dump(capabilities) if capabilities is not None else None,
        }))


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1:]))
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - report anything, exit 1
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
