"""The official Python MCP SDK (2.3) client answering a server's questions, for the
multi-round-trip tests (tests/mrtr.rs).

Usage: mrtr_client.py URL MODE ANSWER

MODE is the SDK client's `mode`: `auto` (probes `server/discover`; a modern server gets
2026-07-28 requests, and `input_required` results are answered by retrying) or `legacy`
(initialize; server-to-client requests on the call's stream). ANSWER is what the elicitation
callback answers: `accept` (confirm, name "yuki"), `refuse` (accept with confirm=false) or
`decline`. The sampling callback answers "five stars". Calls `place_order` and
`summarise_reviews` and prints ONE JSON line:
    {"asked": [{"method", "text"}...], "order": <CallToolResult>, "summary": <CallToolResult>}
Any failure exits 1 with the error on stderr.
"""

import asyncio
import json
import sys

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CreateMessageResult, ElicitResult, TextContent


async def main(url: str, mode: str, answer: str) -> None:
    asked: list[dict] = []

    async def sampling(context, params):
        content = params.messages[0].content
        asked.append({"method": "sampling/createMessage", "text": getattr(content, "text", str(content))})
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text="five stars"), model="m")

    async def elicitation(context, params):
        asked.append({"method": "elicitation/create", "text": params.message})
        if answer == "decline":
            return ElicitResult(action="decline")
        return ElicitResult(action="accept", content={"confirm": answer == "accept", "name": "yuki"})

    async with Client(
        streamable_http_client(url),
        mode=mode,
        cache=None,
        sampling_callback=sampling,
        elicitation_callback=elicitation,
    ) as client:
        order = await client.call_tool("place_order", {"item": "Naruto vol. 1"})
        summary = await client.call_tool("summarise_reviews", {"title": "Naruto"})
    dump = lambda r: r.model_dump(mode="json", by_alias=True, exclude_none=True)  # noqa: E731
    print(json.dumps({"asked": asked, "order": dump(order), "summary": dump(summary)}), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:4]))
    except BaseException as error:  # noqa: BLE001 - report any failure to the test
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
