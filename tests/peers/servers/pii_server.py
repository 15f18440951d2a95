"""A Python MCP SDK (2.3) server whose every kind of answer carries personal data (an e-mail
address, a payment card number), for the outbound-step tests (tests/suite/outbound.rs): what a
`match_servers` redact hook must strip from a tool result must be stripped from everything else
the same server sends a caller.

Usage: pii_server.py PORT   (prints `READY <port>` once listening)

Tools: `profile` (text with an e-mail and a card), `partial_profile` (the same, but tagged
`resultType: "partial"`, a result type no revision defines), `noisy` (a progress message and a
log entry carrying the e-mail while it runs), `failing` (a JSON-RPC error whose message and data
carry the e-mail), `prompt_hits` (how many times `echo` was got).
Resources: `pii://profile` (text), `pii://card.txt` (a text/plain blob), `pii://photo.png` (a
binary blob). Prompts: `write_to(name)`, `echo(text)`. Completion: three values, one an e-mail.
"""

import argparse

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Completion, TextContent

EMAIL = "ann@example.com"
CARD = "4111 1111 1111 1111"

server = MCPServer("pii-fixtures")
hits = {"echo": 0}


@server.tool(description="A customer's profile")
def profile() -> str:
    return f"contact {EMAIL}, card {CARD}"


@server.tool(description="A profile under a result type of its own")
def partial_profile() -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=f"contact {EMAIL}")], result_type="partial")


@server.tool(description="Reports progress and logs while it runs")
async def noisy(ctx: Context) -> str:
    await ctx.report_progress(1, 2, message=f"mailing {EMAIL}")
    await ctx.info(f"sent to {EMAIL}")
    await ctx.report_progress(2, 2, message="done")
    return "noisy done"


@server.tool(description="Fails with the customer's address in its error")
def failing() -> str:
    raise MCPError(code=-32602, message=f"no account for {EMAIL}", data={"email": EMAIL})


@server.tool(description="How many times the echo prompt was got")
def prompt_hits() -> int:
    return hits["echo"]


@server.resource("pii://profile", name="profile", mime_type="text/plain", description="A profile")
def profile_resource() -> str:
    return f"Ann <{EMAIL}> pays with {CARD}"


@server.resource("pii://card.txt", name="card", mime_type="text/plain", description="A card, as bytes")
def card_resource() -> bytes:
    return f"card {CARD} of {EMAIL}".encode()


@server.resource("pii://photo.png", name="photo", mime_type="image/png", description="Binary bytes")
def photo_resource() -> bytes:
    return f"\x89PNG {EMAIL}".encode()


@server.prompt(description="A letter to a customer")
def write_to(name: str) -> str:
    return f"Write to {name} at {EMAIL} about card {CARD}"


@server.prompt(description="Echoes its argument")
def echo(text: str) -> str:
    hits["echo"] += 1
    return f"Echo: {text}"


@server.completion()
async def complete(ref, argument, context) -> Completion:
    return Completion(values=[EMAIL, "bob", "carol"], total=None, has_more=False)


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    args = parser.parse_args()
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
    anyio.run(_Uvicorn(config).serve)


if __name__ == "__main__":
    main()
