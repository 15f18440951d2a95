"""Upstream peers for the era-probe, stream-resume and upstream-auth tests (stdlib only, threaded).
Every mode records each request it gets, in order, at GET /_seen:
[{"http": "POST", "method": JSON-RPC method or null, "status": HTTP status answered,
  "protocol_version", "session", "last_event_id": those request headers or null}, ...].
It prints {"listen": "127.0.0.1:PORT"} once it listens.

    era_peer.py lenient
        A lenient session-era server, as servers that predate 2026-07-28 and do not enforce
        sessions are: it never looks at headers or sessions; `initialize` answers 2025-06-18
        (or the client's session-era version), `tools/list` one tool `lookup {q}`, `tools/call`
        a text result, any other method (`server/discover` included) a JSON-RPC -32601 in an
        HTTP 200, a notification 202.
    era_peer.py expiring
        Like `lenient` but with a session that is gone at once: `initialize` issues an
        Mcp-Session-Id, every later request with an id gets 404 "Session not found".
    era_peer.py refuse CODE
        Every request gets HTTP CODE (e.g. 401, with WWW-Authenticate) and a JSON-RPC error.
    era_peer.py refuse-handshake CODE
        `server/discover` gets a plain-text 404 (a session-era server); `initialize` gets CODE.
    era_peer.py early-end RETRY_MS [REPLAY_BYTES]
        A session-era server (one session) whose `tools/call` answer stream sends a priming
        event (`id`, `retry: RETRY_MS`, empty data) and ends. Each GET (the reconnection) gets
        REPLAY_BYTES of progress notifications (default 0), a new priming event, then the
        answer if it is GET number `answer_after` or later, else the stream ends again.
        POST /_answer_after {"n": N} sets it (default 1; 0: never answer).
    era_peer.py proxy URL
        A recording reverse proxy in front of URL (a real SDK server): every request is
        forwarded to URL as it came (method, headers, body) and the answer streamed back as
        it arrives, so SSE answers stay streams.
"""

import http.client
import json
import sys
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SEEN = []
LOCK = threading.Lock()
MODE = sys.argv[1] if len(sys.argv) > 1 else "lenient"
ARGS = sys.argv[2:]
STATE = {"event": 0, "gets": 0, "answer_after": 1, "pending": None}
SESSION = uuid.uuid4().hex
HOP = {"host", "connection", "content-length", "transfer-encoding", "keep-alive", "accept-encoding"}


def record(handler, method):
    entry = {
        "http": handler.command,
        "method": method,
        "status": None,
        "protocol_version": handler.headers.get("mcp-protocol-version"),
        "session": handler.headers.get("mcp-session-id"),
        "last_event_id": handler.headers.get("last-event-id"),
    }
    with LOCK:
        SEEN.append(entry)
    return entry


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass

    # -- plumbing ---------------------------------------------------------------------------

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def send(self, entry, status, payload=None, content_type="application/json", extra=()):
        entry["status"] = status
        body = b"" if payload is None else (payload if isinstance(payload, bytes) else json.dumps(payload).encode())
        self.send_response(status)
        if body:
            self.send_header("Content-Type", content_type)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def start_stream(self, entry):
        entry["status"] = 200
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Mcp-Session-Id", SESSION)
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True

    def event(self, data="", event_id=None, retry=None):
        lines = []
        if event_id is not None:
            lines.append(f"id: {event_id}")
        if retry is not None:
            lines.append(f"retry: {retry}")
        lines.append(f"data: {data}")
        self.wfile.write(("\n".join(lines) + "\n\n").encode())
        self.wfile.flush()

    def next_id(self):
        with LOCK:
            STATE["event"] += 1
            return f"ev-{STATE['event']}"

    # -- verbs ------------------------------------------------------------------------------

    def do_GET(self):
        if self.path == "/_seen":
            with LOCK:
                body = json.dumps(SEEN).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        if MODE == "proxy":
            return self.proxy(record(self, None), b"")
        entry = record(self, None)
        if MODE == "refuse":
            return self.refuse(entry, None)
        if MODE == "early-end":
            return self.resume(entry)
        self.send(entry, 405, b"no GET stream", "text/plain")

    def do_DELETE(self):
        entry = record(self, None)
        if MODE == "proxy":
            return self.proxy(entry, b"")
        self.send(entry, 200)

    def do_POST(self):
        raw = self.body()
        if self.path == "/_answer_after":
            with LOCK:
                STATE["answer_after"] = json.loads(raw)["n"]
            self.send_response(204)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        try:
            message = json.loads(raw or b"{}")
        except ValueError:
            message = {}
        method = message.get("method") if isinstance(message, dict) else None
        entry = record(self, method)
        if MODE == "proxy":
            return self.proxy(entry, raw)
        rid = message.get("id") if isinstance(message, dict) else None
        if MODE == "refuse":
            return self.refuse(entry, rid)
        if MODE == "refuse-handshake" and method == "server/discover":
            return self.send(entry, 404, b"Not Found", "text/plain")
        if MODE == "refuse-handshake" and method == "initialize":
            return self.refuse(entry, rid)
        if rid is None:
            return self.send(entry, 202)
        if MODE == "expiring" and method != "initialize":
            error = {"code": -32001, "message": "Session not found"}
            return self.send(entry, 404, {"jsonrpc": "2.0", "id": rid, "error": error})
        if MODE == "early-end" and method == "tools/call":
            return self.early_end(entry, rid)
        self.send(entry, 200, {"jsonrpc": "2.0", "id": rid, **self.answer(method, message)},
                  extra=[("Mcp-Session-Id", SESSION)] if MODE in ("expiring", "early-end") else [])

    # -- behaviours -------------------------------------------------------------------------

    def answer(self, method, message):
        params = message.get("params") or {}
        if method == "initialize":
            asked = params.get("protocolVersion")
            version = asked if asked in ("2025-11-25", "2025-06-18", "2025-03-26") else "2025-06-18"
            if MODE == "lenient":
                version = "2025-06-18"
            return {"result": {"protocolVersion": version, "capabilities": {"tools": {}},
                               "serverInfo": {"name": f"era-peer-{MODE}", "version": "1.0.0"}}}
        if method == "tools/list":
            tool = {"name": "lookup", "description": "Look a word up",
                    "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
                    "annotations": {"readOnlyHint": True}}
            return {"result": {"tools": [tool]}}
        if method == "tools/call":
            args = params.get("arguments") or {}
            return {"result": {"content": [{"type": "text", "text": f"{MODE}:{args.get('q')}"}]}}
        return {"error": {"code": -32601, "message": f"Method not found: {method}"}}

    def refuse(self, entry, rid):
        code = int(ARGS[0])
        error = {"jsonrpc": "2.0", "id": rid, "error": {"code": -32001, "message": "Unauthorized"}}
        self.send(entry, code, error, extra=[("WWW-Authenticate", 'Bearer realm="mcp"')])

    def early_end(self, entry, rid):
        with LOCK:
            STATE["pending"] = rid
        self.start_stream(entry)
        self.event(event_id=self.next_id(), retry=ARGS[0])

    def resume(self, entry):
        with LOCK:
            STATE["gets"] += 1
            gets, answer_after, pending = STATE["gets"], STATE["answer_after"], STATE["pending"]
        self.start_stream(entry)
        replay = int(ARGS[1]) if len(ARGS) > 1 else 0
        note = json.dumps({"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": 1, "progress": 1, "message": "x" * 1000}})
        sent = 0
        while sent < replay:
            self.event(note)
            sent += len(note) + 8
        self.event(event_id=self.next_id(), retry=ARGS[0])
        if answer_after and gets >= answer_after and pending is not None:
            result = {"content": [{"type": "text", "text": f"resumed after {gets} GET(s)"}]}
            self.event(json.dumps({"jsonrpc": "2.0", "id": pending, "result": result}), self.next_id())

    def proxy(self, entry, raw):
        target = urllib.parse.urlsplit(ARGS[0])
        upstream = http.client.HTTPConnection(target.hostname, target.port, timeout=120)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        try:
            upstream.request(self.command, target.path or "/", body=raw or None, headers=headers)
            answer = upstream.getresponse()
        except OSError as e:
            entry["error"] = repr(e)
            return self.send(entry, 502, b"upstream unreachable", "text/plain")
        entry["status"] = answer.status
        self.send_response(answer.status)
        for k, v in answer.getheaders():
            if k.lower() not in HOP:
                self.send_header(k, v)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            while True:
                data = answer.read1(65536)
                if not data:
                    break
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        finally:
            upstream.close()


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    print(json.dumps({"listen": f"127.0.0.1:{server.server_address[1]}", "mode": MODE}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
