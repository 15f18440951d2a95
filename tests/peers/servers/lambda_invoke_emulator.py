"""The AWS Lambda Invoke API on loopback, hosting functions built from awslabs'
run-mcp-servers-with-aws-lambda (PyPI), for tests/agentcore_lambda.rs.

    python lambda_invoke_emulator.py [PORT]      (0 or absent: a free port)

Prints `READY <port>` once it listens. Serves
`POST /2015-03-31/functions/{name}/invocations` as Lambda does for a RequestResponse invoke:
the body is the event; `X-Amz-Client-Context` (base64 JSON) becomes the handler's
`context.client_context` (`.custom`, `.env`, `.client`); the handler's return is answered 200
as JSON; an exception is answered 200 with `X-Amz-Function-Error: Unhandled` and
`{errorMessage, errorType, stackTrace}`; an unknown function is 404
`ResourceNotFoundException`. Invocations run concurrently, as Lambda scales out.

Functions (each awslabs handler starts tests/peers/servers/lambda_store_server.py on stdio per
invocation, as it does in a real Lambda):
  agentcore-store  BedrockAgentCoreGatewayTargetHandler(StdioServerAdapterRequestHandler(params))
                   — AgentCore Gateway's Lambda target contract
  direct-store     stdio_server_adapter(params, event, context) — direct invoke, one JSON-RPC
                   message per event
  direct-undeclared  direct-store behind a handler that routes only the methods it knows
                   and answers `initialize` -32601 (a function that declares nothing)
  agentcore-plain  a hand-written AgentCore target like AgentCore's own examples: reads
                   bedrockAgentCoreToolName, returns plain JSON for `order_status` (an
                   object), `store_motd` (a string), `store_notice` (content blocks without
                   `type`), `store_refuse` (isError), raises for anything else
  direct-hooks     stdio_server_adapter(params, event, context) around
                   tests/peers/servers/hook_server.py (guardrail hooks as MCP tools, for
                   tests/suite/hooks.rs); with HOOK_RECORD set, the hooks' inputs go there

Control endpoints:
  GET  /_invocations  {"invocations": [{function, qualifier, event, client_context, seen,
                      outcome, error_type}]}; `seen` is what reached the MCP server: for the
                      AgentCore handler the JSON-RPC request it built ({method, name,
                      arguments}), for the direct adapter the event's {method, name?, uri?}
  POST /_reset        forgets them
"""

import base64
import json
import os
import sys
import threading
import traceback
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from mcp.client.stdio import StdioServerParameters
from mcp_lambda import (
    BedrockAgentCoreGatewayTargetHandler,
    RequestHandler,
    StdioServerAdapterRequestHandler,
    stdio_server_adapter,
)

HERE = os.path.dirname(os.path.abspath(__file__))
STORE = StdioServerParameters(
    command=sys.executable,
    args=[os.path.join(HERE, "lambda_store_server.py")],
    env={"PYTHONUNBUFFERED": "1", "PATH": os.environ.get("PATH", "")},
)

HOOKS = StdioServerParameters(
    command=sys.executable,
    args=[os.path.join(HERE, "hook_server.py"), "--stdio"]
    + (["--record", os.environ["HOOK_RECORD"]] if os.environ.get("HOOK_RECORD") else []),
    env={"PYTHONUNBUFFERED": "1", "PATH": os.environ.get("PATH", "")},
)

LOCK = threading.Lock()
INVOCATIONS = []


class ClientContext:
    """What the Lambda Python runtime gives a handler as `context.client_context`."""

    def __init__(self, decoded):
        self.custom = decoded.get("custom") or {}
        self.env = decoded.get("env") or {}
        self.client = decoded.get("client")


class Context:
    """The Lambda Python runtime's context object (the fields handlers read)."""

    def __init__(self, function, client_context):
        self.function_name = function
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:us-east-1:000000000000:function:{function}"
        self.memory_limit_in_mb = 512
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function}"
        self.log_stream_name = "local"
        self.identity = None
        self.client_context = client_context

    def get_remaining_time_in_millis(self):
        return 30_000


class Recording(RequestHandler):
    """Passes the AgentCore handler's JSON-RPC request on, noting what it asked for."""

    def __init__(self, inner, seen):
        self.inner = inner
        self.seen = seen

    def handle_request(self, request, context):
        params = request.params or {}
        self.seen.update(method=request.method, name=params.get("name"), arguments=params.get("arguments"))
        return self.inner.handle_request(request, context)


def agentcore_store(event, context, seen):
    handler = BedrockAgentCoreGatewayTargetHandler(Recording(StdioServerAdapterRequestHandler(STORE), seen))
    return handler.handle(event, context)


def direct_store(event, context, seen):
    if isinstance(event, dict):
        params = event.get("params") or {}
        seen.update(method=event.get("method"), name=params.get("name"), uri=params.get("uri"))
    return stdio_server_adapter(STORE, event, context)


def direct_undeclared(event, context, seen):
    if isinstance(event, dict) and event.get("method") == "initialize":
        seen.update(method="initialize")
        return {"jsonrpc": "2.0", "id": event.get("id"), "error": {"code": -32601, "message": "Method not found"}}
    return direct_store(event, context, seen)


def direct_hooks(event, context, seen):
    if isinstance(event, dict):
        seen.update(method=event.get("method"), name=(event.get("params") or {}).get("name"))
    return stdio_server_adapter(HOOKS, event, context)


def agentcore_plain(event, context, seen):
    full = context.client_context.custom.get("bedrockAgentCoreToolName", "")
    tool = full.split("___", 1)[1] if "___" in full else full
    seen.update(name=tool, arguments=event)
    if tool == "order_status":
        return {"order_id": event.get("order_id"), "status": "shipped", "items": 2}
    if tool == "store_motd":
        return "本日は全品10%オフ"
    if tool == "store_notice":
        return {"content": [{"text": "closed on Monday"}]}
    if tool == "store_refuse":
        return {"content": [{"type": "text", "text": f"no order {event.get('order_id')}"}], "isError": True}
    raise KeyError(f"unknown tool {tool}")


FUNCTIONS = {
    "agentcore-store": agentcore_store,
    "direct-store": direct_store,
    "direct-undeclared": direct_undeclared,
    "agentcore-plain": agentcore_plain,
    "direct-hooks": direct_hooks,
}


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
        if self.path == "/_invocations":
            with LOCK:
                self.answer(200, {"invocations": list(INVOCATIONS)})
        else:
            self.answer(404, {"message": "not found"})

    def do_POST(self):
        url = urlparse(self.path)
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if url.path == "/_reset":
            with LOCK:
                INVOCATIONS.clear()
            return self.answer(200, {})
        parts = url.path.strip("/").split("/")
        if len(parts) != 4 or parts[0] != "2015-03-31" or parts[1] != "functions" or parts[3] != "invocations":
            return self.answer(404, {"message": f"unknown path {url.path}"})
        name = parts[2]
        function = FUNCTIONS.get(name)
        if function is None:
            return self.answer(
                404,
                {"Type": "User", "message": f"Function not found: {name}"},
                [("x-amzn-errortype", "ResourceNotFoundException")],
            )
        encoded = self.headers.get("x-amz-client-context")
        decoded = json.loads(base64.b64decode(encoded)) if encoded else None
        event = json.loads(body) if body else None
        seen = {}
        record = {
            "function": name,
            "qualifier": parse_qs(url.query).get("Qualifier", [None])[0],
            "event": event,
            "client_context": decoded,
            "seen": seen,
        }
        context = Context(name, ClientContext(decoded) if decoded is not None else None)
        try:
            result = function(event, context, seen)
        except BaseException as error:  # what the Lambda runtime reports for any exception
            record.update(outcome="error", error_type=type(error).__name__)
            with LOCK:
                INVOCATIONS.append(record)
            return self.answer(
                200,
                {
                    "errorMessage": str(error),
                    "errorType": type(error).__name__,
                    "stackTrace": traceback.format_tb(error.__traceback__),
                },
                [("x-amz-function-error", "Unhandled"), ("x-amz-executed-version", "$LATEST")],
            )
        record.update(outcome="result", error_type=None)
        with LOCK:
            INVOCATIONS.append(record)
        self.answer(200, result, [("x-amz-executed-version", "$LATEST")])


def main():
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"READY {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
