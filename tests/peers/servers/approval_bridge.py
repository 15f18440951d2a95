"""An approval bridge (a ticketing or chat bridge stand-in) as an MCP tool, on the official
Python MCP SDK 2.x, for tests/suite/approvals.rs.

    python approval_bridge.py PORT --record FILE     streamable HTTP on 127.0.0.1:PORT/mcp

Its tool `request_approval` takes the gateway's approval facts `{id, tool, server, subject,
endpoint, arguments, args_sha256, rule, expires_at}`, appends them to FILE as one JSON line,
and answers as the operator on the other side would: approve when `arguments.quantity` is 6,
deny when it is 7, and `pending` (a ticket opened, decided later) otherwise. Prints
`READY <port>` once listening.
"""

import argparse
import json

import anyio
from mcp.server.mcpserver import MCPServer as Server

server = Server("approval-bridge")
RECORD = None


@server.tool()
def request_approval(
    id: str,
    tool: str,
    server: str,
    arguments: dict,
    args_sha256: str,
    rule: str,
    expires_at: str,
    subject: str | None = None,
    endpoint: str | None = None,
) -> str:
    """Ask an operator to approve a tool call."""
    facts = {"id": id, "tool": tool, "server": server, "subject": subject, "endpoint": endpoint,
             "arguments": arguments, "args_sha256": args_sha256, "rule": rule, "expires_at": expires_at}
    with open(RECORD, "a", encoding="utf-8") as out:
        out.write(json.dumps(facts) + "\n")
    quantity = arguments.get("quantity")
    decision = {6: "approve", 7: "deny"}.get(quantity, "pending")
    return json.dumps({"decision": decision})


async def serve_http(port: int) -> None:
    import uvicorn

    class Uvicorn(uvicorn.Server):
        async def startup(self, sockets=None) -> None:  # type: ignore[override]
            await super().startup(sockets=sockets)
            if self.started:
                print(f"READY {self.config.port}", flush=True)

    app = server.streamable_http_app(streamable_http_path="/mcp", json_response=True, host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await Uvicorn(config).serve()


def main() -> None:
    global RECORD
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--record", required=True)
    args = parser.parse_args()
    RECORD = args.record
    anyio.run(serve_http, args.port)


if __name__ == "__main__":
    main()
