"""A small MCP server on stdio with a few of the store's tools, for the Lambda functions of
tests/peers/servers/lambda_invoke_emulator.py (the awslabs handlers start it once per invocation, as
they do in a real Lambda).

    python lambda_store_server.py

Built with the official Python MCP SDK's FastMCP (the `mcp` that
run-mcp-servers-with-aws-lambda depends on, in tests/peers/.venv-lambda). Tools:
  manga_search   {query, max_results?}  -> structured {"results": [...], "query": …} (read-only)
  price_lookup   {manga_id}             -> structured price; an unknown id raises, which the
                                           SDK answers as a tool error (isError: true)
  add_to_cart    {manga_id, quantity?}  -> structured cart line (neither read-only nor idempotent)
  crash_server   {}                     -> the server process exits mid-call (the adapter then
                                           fails, and the AgentCore handler raises)
  slow_search    {query, seconds}       -> answers like manga_search after sleeping `seconds`
  big_answer     {size}                 -> one text block of `size` bytes
Resources (for the federation of resources and prompts, tests/suite/federation_sources.rs):
  store://catalog/top        the catalogue as JSON
  store://manga/{manga_id}   one manga as JSON (a template; manga_id completes from the catalogue)
Prompts:
  reply_style {tone}         how the store answers a shopper (tone completes: formal, friendly, playful)
"""

import json
import os
import time
from typing import Any

from mcp.server.fastmcp import FastMCP
from mcp.types import Completion, PromptReference, ResourceTemplateReference, ToolAnnotations

CATALOG = {
    "MNG-00000004": {"title": "鬼滅の刃 1", "price_jpy": 528},
    "MNG-00000017": {"title": "Frieren: Beyond Journey's End 1", "price_jpy": 990},
    "MNG-00000042": {"title": "ONE PIECE 100", "price_jpy": 528},
}

READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)

mcp = FastMCP("lambda-store")


def search(query: str, max_results: int) -> dict[str, Any]:
    words = query.lower().split()
    hits = [
        {"manga_id": manga_id, "title": item["title"]}
        for manga_id, item in CATALOG.items()
        if any(word in item["title"].lower() for word in words)
    ]
    return {"results": hits[:max_results], "query": query}


@mcp.tool(annotations=READ_ONLY, structured_output=True)
def manga_search(query: str, max_results: int = 5) -> dict[str, Any]:
    """Search the catalog by title."""
    return search(query, max_results)


@mcp.tool(annotations=READ_ONLY, structured_output=True)
def price_lookup(manga_id: str) -> dict[str, Any]:
    """Current price of one manga."""
    if manga_id not in CATALOG:
        raise ValueError(f"no manga with id {manga_id}")
    return {"manga_id": manga_id, "price_jpy": CATALOG[manga_id]["price_jpy"]}


@mcp.tool(annotations=ToolAnnotations(readOnlyHint=False, idempotentHint=False, destructiveHint=False), structured_output=True)
def add_to_cart(manga_id: str, quantity: int = 1) -> dict[str, Any]:
    """Add a manga to the cart."""
    return {"manga_id": manga_id, "quantity": quantity, "line_total_jpy": CATALOG.get(manga_id, {}).get("price_jpy", 0) * quantity}


@mcp.tool(annotations=READ_ONLY)
def crash_server() -> str:
    """Exits the server process in the middle of the call."""
    os._exit(3)


@mcp.tool(annotations=READ_ONLY, structured_output=True)
def slow_search(query: str, seconds: float) -> dict[str, Any]:
    """manga_search, after a delay."""
    time.sleep(seconds)
    return search(query, 5)


@mcp.tool(annotations=READ_ONLY)
def big_answer(size: int) -> str:
    """One text block of `size` bytes."""
    return "x" * size


@mcp.resource("store://catalog/top", mime_type="application/json")
def catalog_top() -> str:
    """The store's catalogue."""
    return json.dumps(CATALOG, ensure_ascii=False)


@mcp.resource("store://manga/{manga_id}", mime_type="application/json")
def manga(manga_id: str) -> str:
    """One manga of the catalogue."""
    return json.dumps({"manga_id": manga_id, **CATALOG.get(manga_id, {})}, ensure_ascii=False)


TONES = ["formal", "friendly", "playful"]


@mcp.prompt()
def reply_style(tone: str) -> str:
    """How the store answers a shopper."""
    return f"Answer the shopper in a {tone} tone."


@mcp.completion()
async def complete(ref, argument, context):
    if isinstance(ref, PromptReference) and ref.name == "reply_style" and argument.name == "tone":
        return Completion(values=[t for t in TONES if t.startswith(argument.value)], hasMore=False)
    if isinstance(ref, ResourceTemplateReference) and argument.name == "manga_id":
        return Completion(values=[m for m in CATALOG if m.startswith(argument.value)], hasMore=False)
    return None


if __name__ == "__main__":
    mcp.run("stdio")
