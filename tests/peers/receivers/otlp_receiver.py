"""A minimal OTLP/HTTP trace receiver for tests: decodes `POST /v1/traces` (protobuf, as the
gateway's exporter sends it) with the OpenTelemetry project's own Python protobuf bindings
(`opentelemetry-proto`), and appends every span to a file as one JSON line.

Usage: otlp_receiver.py PORT OUT.jsonl   (prints "otlp receiver listening on PORT" when ready)
       otlp_receiver.py PORT --count       (benchmarks: decode and count only; GET /_count)

Each line: {"trace_id", "span_id", "parent_span_id" (hex, "" for a root), "name", "kind"
("SERVER", "CLIENT", ...), "attributes" {key: value}, "status" ("UNSET"/"OK"/"ERROR"),
"service" (resource service.name), "scope"}. Requests that are not valid OTLP get 400.
"""

import gzip
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

LOCK = threading.Lock()
COUNT = [0]


def any_value(value):
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    if kind == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, kind)


def attributes(pairs):
    return {kv.key: any_value(kv.value) for kv in pairs}


def spans_of(request):
    for resource_spans in request.resource_spans:
        resource = attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_span_id": span.parent_span_id.hex(),
                    "name": span.name,
                    "kind": Span.SpanKind.Name(span.kind).removeprefix("SPAN_KIND_"),
                    "attributes": attributes(span.attributes),
                    "status": Status.StatusCode.Name(span.status.code).removeprefix("STATUS_CODE_"),
                    "service": resource.get("service.name"),
                    "scope": scope_spans.scope.name,
                }


class Handler(BaseHTTPRequestHandler):
    out = None

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError:
            self.send_error(400, "not an OTLP ExportTraceServiceRequest")
            return
        if self.out is None:
            spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
            with LOCK:
                COUNT[0] += spans
        else:
            lines = [json.dumps(span, sort_keys=True) for span in spans_of(request)]
            with LOCK, open(self.out, "a", encoding="utf-8") as f:
                for line in lines:
                    f.write(line + "\n")
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def do_GET(self):
        if self.path != "/_count":
            self.send_error(404)
            return
        with LOCK:
            body = str(COUNT[0]).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def main():
    port, out = int(sys.argv[1]), sys.argv[2]
    Handler.out = None if out == "--count" else out
    if Handler.out is not None:
        open(out, "a", encoding="utf-8").close()
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"otlp receiver listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
