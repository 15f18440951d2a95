"""An IAM-authorizing front door, as API Gateway or a Lambda function URL is: every request's
AWS Signature Version 4 is recomputed with botocore's own signer and compared; a request whose
signature differs (or is missing, or names another key, region or service) is answered 403,
one that matches is forwarded to the MCP server behind and its answer passed back.

Usage (the venv with botocore): sigv4_proxy.py PORT --backend URL --access-key AK --secret-key SK
                                [--region R] [--service S]

The signature is checked over exactly what arrived: the method, the path and query, the
headers the request lists in `SignedHeaders` with their received values, `X-Amz-Date`, and
the body. Control: GET /control/stats -> {"verified": n, "refused": n, "services": [...]}.
Readiness: prints `READY <port>` on stdout once listening.
"""

import argparse
import hmac
import json
import re
import sys
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

AUTH = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<date>\d{8})/(?P<region>[^/]+)/(?P<service>[^/]+)/aws4_request, "
    r"SignedHeaders=(?P<signed>[^,]+), Signature=(?P<signature>[0-9a-f]{64})$"
)
STATS = {"verified": 0, "refused": 0, "reasons": {}}
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"}


def check(args, method: str, path: str, headers: dict, body: bytes) -> str | None:
    """None when the signature is botocore's for this request; else why not."""
    match = AUTH.match(headers.get("authorization", ""))
    if not match:
        return "no SigV4 authorization header"
    if match["key"] != args.access_key:
        return "unknown access key"
    if (match["region"], match["service"]) != (args.region, args.service):
        return f"signed for {match['region']}/{match['service']}"
    amz_date = headers.get("x-amz-date", "")
    if not amz_date.startswith(match["date"]):
        return "X-Amz-Date does not match the credential scope"
    signed = match["signed"].split(";")
    if "host" not in signed or "x-amz-date" not in signed:
        return "host and x-amz-date must be signed"
    missing = [name for name in signed if name not in headers]
    if missing:
        return f"signed headers missing: {missing}"
    request = AWSRequest(
        method=method,
        url=f"http://{headers['host']}{path}",
        headers={name: headers[name] for name in signed},
        data=body,
    )
    request.context["timestamp"] = amz_date
    signer = SigV4Auth(Credentials(args.access_key, args.secret_key), args.service, args.region)
    canonical = signer.canonical_request(request)
    expected = signer.signature(signer.string_to_sign(request, canonical), request)
    if not hmac.compare_digest(expected, match["signature"]):
        return "signature mismatch"
    return None


def handler(args):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):
            pass

        def _answer(self, status: int, body: bytes, headers=()):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self):
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.path == "/control/stats":
                return self._answer(200, json.dumps(STATS).encode(), [("content-type", "application/json")])
            headers = {k.lower(): v for k, v in self.headers.items()}
            reason = check(args, self.command, self.path, headers, body)
            if reason:
                STATS["refused"] += 1
                STATS["reasons"][reason] = STATS["reasons"].get(reason, 0) + 1
                message = json.dumps({"message": "The request signature we calculated does not match", "reason": reason})
                return self._answer(403, message.encode(), [("content-type", "application/json")])
            STATS["verified"] += 1
            forward = urllib.request.Request(
                args.backend.rstrip("/") + self.path,
                data=body if body else None,
                method=self.command,
                headers={k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP and k.lower() != "authorization"},
            )
            try:
                with urllib.request.urlopen(forward, timeout=30) as response:
                    status, answer, answer_headers = response.status, response.read(), response.getheaders()
            except urllib.error.HTTPError as error:
                status, answer, answer_headers = error.code, error.read(), error.headers.items()
            kept = [(k, v) for k, v in answer_headers if k.lower() not in HOP_BY_HOP]
            self._answer(status, answer, kept)

        do_GET = do_POST = do_DELETE = _handle

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", type=int)
    parser.add_argument("--backend", required=True)
    parser.add_argument("--access-key", required=True)
    parser.add_argument("--secret-key", required=True)
    parser.add_argument("--region", default="us-east-1")
    parser.add_argument("--service", default="execute-api")
    args = parser.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), handler(args))
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
