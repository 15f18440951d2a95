"""A session-era streamable-HTTP server with a standalone GET stream (stdlib only, threaded).

    python3 session_stream_server.py

Speaks only the session era: `server/discover` gets a JSON-RPC -32601 (in an HTTP 200);
`initialize` declares `tools.listChanged` and issues an Mcp-Session-Id. `GET /mcp` with that
session opens the standalone stream ("Listening for Messages from the Server", 2025-11-25):
kept open, it carries `notifications/tools/list_changed` each time the tool list changes.
Tools: `grow {name}` adds a tool NAME (answering its own name) and says so on every open GET
stream. `GET /_stats` answers {"gets": GET streams opened, "open": open now,
"lists": tools/list answered}. Prints {"listen": "127.0.0.1:PORT"} once it listens.
"""

import json
import queue
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SESSION = uuid.uuid4().hex
LOCK = threading.Lock()
TOOLS = ["grow"]
STREAMS = []
STATS = {"gets": 0, "open": 0, "lists": 0}


def tool(name):
    return {"name": name, "description": f"tool {name}", "inputSchema": {"type": "object"}}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, body, headers=()):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/_stats":
            with LOCK:
                return self.answer(200, dict(STATS))
        if self.headers.get("mcp-session-id") != SESSION:
            return self.answer(404, {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "no session"}})
        events = queue.Queue()
        with LOCK:
            STATS["gets"] += 1
            STATS["open"] += 1
            STREAMS.append(events)
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        try:
            self.wfile.write(b": open\n\n")
            self.wfile.flush()
            while True:
                try:
                    message = events.get(timeout=5)
                except queue.Empty:
                    self.wfile.write(b":\n\n")
                    self.wfile.flush()
                    continue
                self.wfile.write(f"event: message\ndata: {json.dumps(message)}\n\n".encode())
                self.wfile.flush()
        except OSError:
            pass
        finally:
            with LOCK:
                STREAMS.remove(events)
                STATS["open"] -= 1

    def do_DELETE(self):
        self.send_response(204)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        message = json.loads(self.rfile.read(length) or b"{}")
        method, id_ = message.get("method"), message.get("id")
        if id_ is None:
            self.send_response(202)
            self.send_header("content-length", "0")
            self.end_headers()
            return
        if method == "initialize":
            return self.answer(200, {"jsonrpc": "2.0", "id": id_, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {"listChanged": True}},
                "serverInfo": {"name": "session-stream-server", "version": "1"},
            }}, [("mcp-session-id", SESSION)])
        if self.headers.get("mcp-session-id") != SESSION:
            if method == "server/discover":
                return self.answer(200, {"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": method}})
            return self.answer(404, {"jsonrpc": "2.0", "id": id_, "error": {"code": -32600, "message": "no session"}})
        if method == "tools/list":
            with LOCK:
                STATS["lists"] += 1
                tools = [tool(name) for name in TOOLS]
            return self.answer(200, {"jsonrpc": "2.0", "id": id_, "result": {"tools": tools}})
        if method == "tools/call":
            name = message["params"]["name"]
            if name == "grow":
                added = message["params"].get("arguments", {}).get("name", "added")
                with LOCK:
                    TOOLS.append(added)
                    for stream in STREAMS:
                        stream.put({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
                text = f"added {added}"
            else:
                text = name
            return self.answer(200, {"jsonrpc": "2.0", "id": id_, "result": {
                "content": [{"type": "text", "text": text}]}})
        return self.answer(200, {"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": method}})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(json.dumps({"listen": f"127.0.0.1:{server.server_address[1]}"}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
