"""The gateway as the client of the MCP conformance suite's client scenarios (stdlib only).

    conformance_client.py SERVER_URL

The suite (`conformance client --command CMD --scenario S`) starts a test server for the
scenario and runs CMD with that server's URL appended. This wrapper starts the gateway binary
(`$CONFORMANCE_GATEWAY_BIN`) with one streamable-HTTP server, `conformance`, pointing at that URL, then
drives it the way the orchestrator does: `tools/list`, then one `tools/call` per listed tool
with arguments made from the tool's `inputSchema` (required properties only). It exits 0 when
every call got a JSON-RPC result, 1 otherwise; the gateway is stopped (SIGTERM) either way and
its log is copied to stderr, which the suite keeps in its results.

With `CONFORMANCE_CALLER=modern` in the environment the calls are made as a 2026-07-28 client
that declares `elicitation` (`_meta` and headers): an `input_required` result asking
`elicitation/create` is answered by accepting the requested schema's defaults, and the call is
retried with `inputResponses` and the `requestState` echoed (at most 8 rounds). Against the
suite's session-era servers this is the gateway turning their requests into questions for a
modern caller.
"""

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request


def sample(schema):
    """A value of the schema's type (numbers are 2 and 3 alternately, so a sum is checkable)."""
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "string")
    if "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    return {
        "integer": 2,
        "number": 2,
        "boolean": True,
        "object": {},
        "array": [],
        "null": None,
    }.get(kind, "conformance")


def arguments(tool):
    schema = tool.get("inputSchema") or {}
    properties = schema.get("properties") or {}
    args = {}
    for n, name in enumerate(schema.get("required") or []):
        value = sample(properties.get(name) or {})
        if isinstance(value, int) and not isinstance(value, bool):
            value += n
        args[name] = value
    return args


def post(base, message, headers=None):
    request = urllib.request.Request(
        base + "/mcp",
        data=json.dumps(message).encode(),
        headers={"Content-Type": "application/json", "Accept": "application/json", **(headers or {})},
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        return json.loads(response.read())


MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
    "io.modelcontextprotocol/clientInfo": {"name": "conformance-modern-caller", "version": "1.0.0"},
}


def with_defaults(params):
    """An elicitation result accepting every default of the requested schema."""
    properties = (params.get("requestedSchema") or {}).get("properties") or {}
    content = {name: prop["default"] for name, prop in properties.items() if "default" in prop}
    return {"action": "accept", "content": content}


def call_modern(base, request_id, name, args):
    """A 2026-07-28 tools/call, answering `input_required` elicitation questions with defaults."""
    params = {"name": name, "arguments": args, "_meta": MODERN_META}
    headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": name}
    for round_ in range(8):
        answer = post(base, {"jsonrpc": "2.0", "id": request_id * 100 + round_, "method": "tools/call", "params": params}, headers)
        result = answer.get("result") or {}
        if result.get("resultType") != "input_required":
            return answer
        responses = {}
        for key, asked in (result.get("inputRequests") or {}).items():
            if asked.get("method") != "elicitation/create":
                raise RuntimeError(f"asked {asked.get('method')!r}, which this caller did not declare")
            responses[key] = with_defaults(asked.get("params") or {})
        params = {"name": name, "arguments": args, "_meta": MODERN_META, "inputResponses": responses}
        if "requestState" in result:
            params["requestState"] = result["requestState"]
    raise RuntimeError("still asked after 8 rounds")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: conformance_client.py SERVER_URL")
    url = sys.argv[-1]
    binary = os.environ.get("CONFORMANCE_GATEWAY_BIN")
    if not binary or not os.path.exists(binary):
        sys.exit("CONFORMANCE_GATEWAY_BIN must name the mcp-gateway binary")
    config = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
    config.write(
        "ready_min_tools = 0\nrefresh_interval_secs = 3600\n"
        f'[servers.conformance]\ntransport = "http"\nurl = "{url}"\n'
    )
    config.close()
    gateway = subprocess.Popen(
        [binary, "serve", "--config", config.name, "--listen", "127.0.0.1:0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={k: v for k, v in os.environ.items() if not k.startswith("MCP_GATEWAY_")},
    )
    log = []
    listening = threading.Event()
    address = {}

    def pump():
        for line in gateway.stdout:
            log.append(line)
            if not listening.is_set() and '"listen"' in line:
                try:
                    address["listen"] = json.loads(line)["listen"]
                except ValueError:
                    continue
                listening.set()

    threading.Thread(target=pump, daemon=True).start()
    ok = False
    try:
        if not listening.wait(20):
            raise RuntimeError("the gateway did not start listening")
        base = "http://" + address["listen"]
        # Ready = the registry is loaded (the first tools/list of the server has run).
        deadline = time.monotonic() + 20
        while True:
            try:
                with urllib.request.urlopen(base + "/readyz", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("the gateway never became ready")
            time.sleep(0.05)
        listed = post(base, {"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        print(json.dumps(listed))
        tools = listed["result"]["tools"]
        ok = True
        modern = os.environ.get("CONFORMANCE_CALLER") == "modern"
        for n, tool in enumerate(tools):
            if modern:
                answer = call_modern(base, 2 + n, tool["name"], arguments(tool))
            else:
                answer = post(
                    base,
                    {
                        "jsonrpc": "2.0",
                        "id": 2 + n,
                        "method": "tools/call",
                        "params": {"name": tool["name"], "arguments": arguments(tool)},
                    },
                )
            print(json.dumps(answer))
            ok = ok and "result" in answer
    except Exception as e:  # noqa: BLE001 - reported, then the exit code says it failed
        print(f"conformance client failed: {e!r}", file=sys.stderr)
    finally:
        gateway.terminate()
        try:
            gateway.wait(15)
        except subprocess.TimeoutExpired:
            gateway.kill()
        os.unlink(config.name)
        sys.stderr.write("".join(log))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
