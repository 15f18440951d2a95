"""An odd 2024-11-05 HTTP+SSE upstream for the gateway's tests (Python stdlib only, threaded).

    python3 odd_sse_server.py    # prints {"listen": "127.0.0.1:PORT"}

The GET path picks the behaviour:
  /foreign-endpoint  an SSE stream whose `endpoint` event names http://localhost:PORT/messages
                     (this very server under another origin), then stays open
  /refuse-posts      an SSE stream whose `endpoint` is /refuse; every POST there gets HTTP 401
  /not-sse           HTTP 200 with a JSON body, not an event stream
GET /_hits returns {path: requests received} (POSTs and GETs, query left out).
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

HITS = {}
LOCK = threading.Lock()
PORT = 0


def hit(path):
    with LOCK:
        HITS[path] = HITS.get(path, 0) + 1


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass

    def stream(self, endpoint):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        self.wfile.write(f"event: endpoint\ndata: {endpoint}\n\n".encode())
        self.wfile.flush()
        try:
            while True:
                time.sleep(1)
                self.wfile.write(b": keepalive\n\n")
                self.wfile.flush()
        except OSError:
            pass

    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/_hits":
            with LOCK:
                body = json.dumps(HITS).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        hit(path)
        if path == "/foreign-endpoint":
            self.stream(f"http://localhost:{PORT}/messages?sessionId=1")
        elif path == "/refuse-posts":
            self.stream("/refuse?sessionId=1")
        elif path == "/not-sse":
            body = b'{"jsonrpc":"2.0","id":1,"result":{}}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        hit(path)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        status = 401 if path == "/refuse" else 202
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()


def main():
    global PORT
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    PORT = server.server_address[1]
    print(json.dumps({"listen": f"127.0.0.1:{PORT}"}), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
