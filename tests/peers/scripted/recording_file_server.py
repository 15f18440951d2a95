"""A static file server that records what it received: Python's own
`http.server.SimpleHTTPRequestHandler` (stdlib), which, like many static servers and
frameworks, percent-decodes a path (`%2F` included) and then resolves its dot segments
(`posixpath.normpath`) before it looks the file up, so `/users/../keys.json` and
`/public/..%2Fkeys.json` both serve `/keys.json`.

Every request but `/_received` is recorded (method, raw path, the file it resolved to, headers)
and `GET /_received` returns the record as JSON: the tests assert what reached the server
(tests/suite/openapi_hostile.rs: OpenAPI documents as hostile input).

Usage: recording_file_server.py DIRECTORY PORT  (prints `READY <port>` once it listens)
"""

import functools
import json
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

received = []


class Recording(SimpleHTTPRequestHandler):
    def do_GET(self):
        if self.path == "/_received":
            body = json.dumps(received).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        received.append(
            {
                "method": "GET",
                "path": self.path,
                "resolved": self.translate_path(self.path)[len(self.directory):],
                "headers": {k.lower(): v for k, v in self.headers.items()},
            }
        )
        super().do_GET()

    def guess_type(self, path):
        if path.endswith(".json"):
            return "application/json"
        return super().guess_type(path)

    def log_message(self, format, *args):
        pass


def main():
    directory, port = sys.argv[1], int(sys.argv[2])
    handler = functools.partial(Recording, directory=directory)
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    print(f"READY {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
