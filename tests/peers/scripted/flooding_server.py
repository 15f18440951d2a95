"""An MCP server on stdio that floods `notifications/tools/list_changed` (Python stdlib only).

    python3 flooding_server.py EVENTS_FILE

Session era; declares `tools.listChanged`. Appends `tools/list` to EVENTS_FILE for every
`tools/list` it answers, so a test can count the refreshes a flood caused without a clock.

Tools:
  flood(count)  sends COUNT `notifications/tools/list_changed` back to back, then answers
                {"sent": COUNT}; its tool list never changes.
"""

import json
import sys

EVENTS = sys.argv[1]
TOOLS = [{
    "name": "flood",
    "description": "send COUNT notifications/tools/list_changed",
    "inputSchema": {"type": "object", "properties": {"count": {"type": "integer"}}},
}]


def event(text):
    with open(EVENTS, "a") as f:
        f.write(text + "\n")


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main():
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        method, id_ = message.get("method"), message.get("id")
        if id_ is None:
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": id_, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "flooding-server", "version": "1"},
            }})
        elif method == "tools/list":
            event("tools/list")
            send({"jsonrpc": "2.0", "id": id_, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            count = int(message["params"].get("arguments", {}).get("count", 0))
            for _ in range(count):
                send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
            send({"jsonrpc": "2.0", "id": id_, "result": {
                "content": [{"type": "text", "text": json.dumps({"sent": count})}],
                "structuredContent": {"sent": count},
            }})
        elif method == "ping":
            send({"jsonrpc": "2.0", "id": id_, "result": {}})
        else:
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": method}})


if __name__ == "__main__":
    main()
