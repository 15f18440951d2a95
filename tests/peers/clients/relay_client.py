"""The official Python MCP SDK (2.x) client with sampling and elicitation callbacks, for the
gateway's relay tests (tests/suite/sampling_relay.rs).

Usage: relay_client.py URL

Connects to URL in the session era ("legacy": initialize declaring sampling and elicitation,
Mcp-Session-Id), calls `test_sampling` and `test_elicitation`, closes the session (the SDK
sends DELETE), and prints ONE JSON line on stdout:
    {"asked": [{"method": ..., "text": ...}...], "sampling": <CallToolResult>, "elicitation": <CallToolResult>}
`asked` lists what the callbacks received, in order. Any failure exits 1 with the error on
stderr.
"""

import asyncio
import json
import sys

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CreateMessageResult, ElicitResult, TextContent

PROMPT = "What is the capital of Japan?"
ANSWER = "Tokyo, said the caller's model"
QUESTION = "Who is ordering?"


async def main(url: str) -> None:
    asked: list[dict] = []

    async def sampling(context, params):
        content = params.messages[0].content
        asked.append({"method": "sampling/createMessage", "text": getattr(content, "text", str(content))})
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text=ANSWER), model="caller-model"
        )

    async def elicitation(context, params):
        asked.append({"method": "elicitation/create", "text": params.message})
        return ElicitResult(action="accept", content={"username": "yuki", "email": "yuki@example.com"})

    async with Client(
        streamable_http_client(url),
        mode="legacy",
        cache=None,
        sampling_callback=sampling,
        elicitation_callback=elicitation,
    ) as client:
        sampled = await client.call_tool("test_sampling", {"prompt": PROMPT})
        elicited = await client.call_tool("test_elicitation", {"message": QUESTION})
    dump = lambda r: r.model_dump(mode="json", by_alias=True, exclude_none=True)  # noqa: E731
    print(json.dumps({"asked": asked, "sampling": dump(sampled), "elicitation": dump(elicited)}), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main(sys.argv[1]))
    except BaseException as error:  # noqa: BLE001 - report any failure to the test
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
