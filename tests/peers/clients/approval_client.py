"""The official Python MCP SDK (2.x) client answering the gateway's approval elicitations, for
tests/suite/approvals.rs.

Usage: approval_client.py URL SUBJECT DECISION TOOL ARGUMENTS_JSON [MODE]

Connects to URL in the session era (MODE `legacy`, the default: initialize declaring
elicitation; the SDK declares both form and URL mode when a callback is set), or in the
2026-07-28 era (MODE `2026-07-28`: the declaration rides in each request's `_meta`, and the
SDK answers an `input_required` question with its callback and retries the call), as SUBJECT (the `x-caller-subject` identity header),
and calls TOOL with ARGUMENTS_JSON once. Its elicitation callback plays the person:
- URL mode: it "opens" the link as a browser would — the approval id from the path, the secret
  from the fragment — and posts DECISION ("approve" or "deny") to the page's decision endpoint,
  then answers `accept` (the person agreed to open the page);
- form mode: it answers `accept` with {"approve": DECISION == "approve"}.
Prints ONE JSON line: {"asked": [{"mode", "message", "url"?, "schema"?}...], "result": <CallToolResult>}.
Any failure exits 1 with the error on stderr.
"""

import asyncio
import json
import sys
import urllib.request
from urllib.parse import urlsplit

import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ElicitResult


def post_decision(url: str, decision: str) -> int:
    parts = urlsplit(url)
    approval = parts.path.rstrip("/").split("/")[-1]
    body = json.dumps({"secret": parts.fragment, "decision": decision}).encode()
    request = urllib.request.Request(
        f"{parts.scheme}://{parts.netloc}/approvals/{approval}/decision",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return response.status


async def main(url: str, subject: str, decision: str, tool: str, arguments: dict, mode: str) -> None:
    asked: list[dict] = []

    async def elicitation(context, params):
        kind = getattr(params, "mode", "form")
        if kind == "url":
            asked.append({"mode": "url", "message": params.message, "url": params.url, "id": params.elicitation_id})
            status = await asyncio.to_thread(post_decision, params.url, decision)
            asked[-1]["page_status"] = status
            return ElicitResult(action="accept")
        schema = params.requested_schema
        schema = schema.model_dump(by_alias=True, exclude_none=True) if hasattr(schema, "model_dump") else schema
        asked.append({"mode": "form", "message": params.message, "schema": schema})
        return ElicitResult(action="accept", content={"approve": decision == "approve"})

    http = httpx2.AsyncClient(headers={"x-caller-subject": subject}, timeout=60)
    async with Client(
        streamable_http_client(url, http_client=http),
        mode=mode,
        cache=None,
        elicitation_callback=elicitation,
    ) as client:
        result = await client.call_tool(tool, arguments)
    dump = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    print(json.dumps({"asked": asked, "result": dump}), flush=True)


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:5], json.loads(sys.argv[5]), sys.argv[6] if len(sys.argv) > 6 else "legacy"))
    except BaseException as error:  # noqa: BLE001 - report any failure to the test
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
