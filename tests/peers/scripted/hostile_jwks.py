"""A hostile JWKS endpoint in front of a real issuer's key set (Python stdlib only).

    python3 hostile_jwks.py --upstream URL [--mode MODE] [--huge-bytes N]

Prints `READY {"jwks": URL, "control": URL}` once listening on a free loopback port.

GET /jwks answers by the current mode (counted in `requests` whatever the mode):
  good  the upstream issuer's JWKS, fetched anew for each request
  fail  HTTP 503
  hang  holds the request open until POST /control/release, then answers as `good`
  huge  HTTP 200, a valid JWK set of about N bytes (default 1 MiB) holding none of the
        issuer's keys, sent without a Content-Length (the body ends when the connection does)

Control:
  POST /control/mode/<mode>   switches the mode for the next requests
  POST /control/release       lets every held request go (and the next ones not wait)
  GET  /control/stats         {"requests": n, "by_mode": {mode: n}, "holding": k, "abandoned": a}
                              holding: held requests whose client is still connected now;
                              abandoned: held requests whose client hung up before release.
"""

import argparse
import json
import select
import socket
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

parser = argparse.ArgumentParser()
parser.add_argument("--upstream", required=True)
parser.add_argument("--mode", default="good")
parser.add_argument("--huge-bytes", type=int, default=1 << 20)
args = parser.parse_args()

lock = threading.Lock()
state = {"mode": args.mode, "requests": 0, "by_mode": {}, "holding": 0, "abandoned": 0}
released = threading.Event()


def client_gone(connection):
    """Whether the client closed its end (readable with nothing to read)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *_):
        pass

    def answer(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def good(self):
        with urllib.request.urlopen(args.upstream, timeout=30) as upstream:
            self.answer(200, upstream.read())

    def do_GET(self):
        if self.path == "/control/stats":
            with lock:
                self.answer(200, json.dumps(state).encode())
            return
        if self.path != "/jwks":
            self.answer(404, b"{}")
            return
        with lock:
            mode = state["mode"]
            state["requests"] += 1
            state["by_mode"][mode] = state["by_mode"].get(mode, 0) + 1
        if mode == "fail":
            self.answer(503, b'{"error": "unavailable"}')
        elif mode == "hang":
            self.hang()
        elif mode == "huge":
            self.huge()
        else:
            self.good()

    def hang(self):
        with lock:
            state["holding"] += 1
        gone = False
        while not released.wait(0.05):
            if client_gone(self.connection):
                gone = True
                break
        with lock:
            state["holding"] -= 1
            if gone:
                state["abandoned"] += 1
        if not gone:
            self.good()

    def huge(self):
        # HTTP/1.0 without a Content-Length: the reader only learns the size by reading.
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        padding = "A" * 4096
        written = self.wfile.write(b'{"keys": [')
        first = True
        try:
            while written < args.huge_bytes:
                key = ("" if first else ",") + json.dumps(
                    {"kty": "oct", "kid": "padding", "k": padding, "alg": "HS256"})
                written += self.wfile.write(key.encode())
                first = False
            self.wfile.write(b"]}")
        except OSError:
            pass  # the reader stopped reading: what a bounded reader does

    def do_POST(self):
        if self.path.startswith("/control/mode/"):
            with lock:
                state["mode"] = self.path.rsplit("/", 1)[1]
            released.clear()
            self.answer(200, b"{}")
        elif self.path == "/control/release":
            released.set()
            self.answer(200, b"{}")
        else:
            self.answer(404, b"{}")


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
server.daemon_threads = True
port = server.server_address[1]
print("READY " + json.dumps({
    "jwks": f"http://127.0.0.1:{port}/jwks",
    "control": f"http://127.0.0.1:{port}/control",
}), flush=True)
try:
    server.serve_forever()
except KeyboardInterrupt:
    sys.exit(0)
