#!/usr/bin/env bash
# Catalogue scale: what a large catalogue costs before and besides the calls (issue 46).
#   1. `/metrics` before any call, with 200, 2,000 and 19,000 tools (the demo server's six and
#      generated ones): bytes, series (`mcp_gateway_metric_series`) and series with a `tool`
#      label. The target: at most 256 KiB whatever the catalogue's size.
#   2. `tools/list`, first page, with 200 and 19,000 tools: p50 and p99 over REQUESTS requests
#      (default 300) on one kept-alive connection, each answer read whole, and its bytes. The
#      target: the 19,000-tool catalogue's p50 within 2x the 200-tool one's.
#   3. RSS of 10,000 indexed resources over idle: the gateway in front of
#      examples/resource_server.rs listing 10,000 resources (100 a page), against the same
#      server listing none; both once the index is built and listed through. The target: at
#      most 1 KiB per resource.
# Usage: bash bench/catalogue-scale.sh [requests]
# BENCH_BIN=path uses that gateway binary; otherwise `cargo build --release` builds it (and the
# resource server). Prints a Markdown section (append it to bench/results.md).
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS="${1:-300}"
source bench/common.sh

target=${CARGO_TARGET_DIR:-target}
echo "==> building (release)" >&2
cargo build --release --locked --quiet --bin mcp-gateway --example resource_server >&2
BIN=${BENCH_BIN:-$target/release/mcp-gateway}
RES=$target/release/examples/resource_server

# start_gateway CONFIG: starts the gateway on CONFIG, waits for /readyz; sets GW_PID and GW_PORT.
start_gateway() {
  GW_PORT=$(free_port)
  "$BIN" serve --config "$1" --listen "127.0.0.1:$GW_PORT" > "$WORK/gateway.log" 2>&1 &
  GW_PID=$!
  PIDS+=("$GW_PID")
  for _ in $(seq 1200); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$GW_PORT/readyz")" = 200 ] && return 0
    kill -0 "$GW_PID" 2>/dev/null || { cat "$WORK/gateway.log" >&2; exit 1; }
    sleep 0.05
  done
  echo "gateway not ready" >&2; exit 1
}
stop() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }

# start_demo EXTRA: the demo server with EXTRA generated tools; sets DEMO_PID and DEMO_PORT.
start_demo() {
  DEMO_PORT=$(free_port)
  "$BIN" demo-server --listen "127.0.0.1:$DEMO_PORT" --extra-tools "$1" > "$WORK/demo.log" 2>&1 &
  DEMO_PID=$!
  PIDS+=("$DEMO_PID")
  wait_http "http://127.0.0.1:$DEMO_PORT/mcp"
}

# Every tool of tools/list, through every page (waits until the catalogue holds WANT tools).
count_tools() { # port want
  python3 - "$1" "$2" <<'PY'
import json, sys, time, urllib.request
port, want = sys.argv[1], int(sys.argv[2])
def count():
    cursor, n = None, 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", method="POST",
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}).encode(),
            headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
        result = json.load(urllib.request.urlopen(req, timeout=120))["result"]
        n += len(result["tools"])
        cursor = result.get("nextCursor")
        if not cursor:
            return n
for _ in range(600):
    n = count()
    if n >= want:
        print(n); sys.exit(0)
    time.sleep(0.1)
sys.exit(f"only {n} tools listed, {want} expected")
PY
}

echo "## Catalogue scale (bench/catalogue-scale.sh, $(date -u +%Y-%m-%d))"
echo
echo "### /metrics before any call"
echo
echo "| tools | bytes | series | series with a tool label |"
echo "|---|---|---|---|"
for total in 200 2000 19000; do
  start_demo $((total - 6))
  demo_toml "$DEMO_PORT" > "$WORK/gw.toml"
  printf 'ready_min_tools = %s\n' "$total" | cat - "$WORK/gw.toml" > "$WORK/gw2.toml"
  start_gateway "$WORK/gw2.toml"
  count_tools "$GW_PORT" "$total" > /dev/null
  curl -s "http://127.0.0.1:$GW_PORT/metrics" > "$WORK/metrics.txt"
  curl -s "http://127.0.0.1:$GW_PORT/metrics" > "$WORK/metrics.txt"
  bytes=$(wc -c < "$WORK/metrics.txt")
  series=$(awk '/^mcp_gateway_metric_series /{print $2}' "$WORK/metrics.txt")
  tool_series=$(grep -v '^#' "$WORK/metrics.txt" | grep -c 'tool="' || true)
  echo "| $total | $bytes | $series | $tool_series |"
  stop "$GW_PID"; stop "$DEMO_PID"
done

echo
echo "### tools/list, first page ($REQUESTS requests, one connection)"
echo
echo "| tools | answer bytes | p50 ms | p99 ms |"
echo "|---|---|---|---|"
for total in 200 19000; do
  start_demo $((total - 6))
  demo_toml "$DEMO_PORT" > "$WORK/gw.toml"
  start_gateway "$WORK/gw.toml"
  count_tools "$GW_PORT" "$total" > /dev/null
  python3 - "$GW_PORT" "$REQUESTS" "$total" <<'PY'
import http.client, json, statistics, sys, time
port, n, total = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
conn = http.client.HTTPConnection("127.0.0.1", port)
times, size = [], 0
for i in range(n + 20):
    t0 = time.perf_counter()
    conn.request("POST", "/mcp", body, headers)
    answer = conn.getresponse().read()
    elapsed = time.perf_counter() - t0
    if i >= 20:  # warm-up
        times.append(elapsed)
    size = len(answer)
times.sort()
p99 = times[int(len(times) * 0.99) - 1]
print(f"| {total} | {size} | {statistics.median(times) * 1000:.2f} | {p99 * 1000:.2f} |")
PY
  stop "$GW_PID"; stop "$DEMO_PID"
done

echo
echo "### 10,000 resources from one server: RSS over idle"
echo
rss_with() { # resources
  local port; port=$(free_port)
  "$RES" "127.0.0.1:$port" --resources "$1" > "$WORK/res.log" 2>&1 & local pid=$!
  PIDS+=("$pid")
  wait_http "http://127.0.0.1:$port/mcp"
  printf 'ready_min_tools = 0\n[servers.res]\ntransport = "http"\nurl = "http://127.0.0.1:%s/mcp"\n' "$port" > "$WORK/res.toml"
  start_gateway "$WORK/res.toml"
  python3 - "$GW_PORT" "$1" <<'PY'
import json, sys, time, urllib.request
port, want = sys.argv[1], int(sys.argv[2])
def listed():
    cursor, n = None, 0
    while True:
        params = {"cursor": cursor} if cursor else {}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", method="POST",
            data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "resources/list", "params": params}).encode(),
            headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
        result = json.load(urllib.request.urlopen(req, timeout=60))["result"]
        n += len(result["resources"])
        cursor = result.get("nextCursor")
        if not cursor:
            return n
for _ in range(600):
    if listed() >= want:
        sys.exit(0)
    time.sleep(0.1)
sys.exit("the resources were never indexed")
PY
  sleep 2  # freed pages handed back (mimalloc purges after a delay)
  awk '/VmRSS/{print $2}' "/proc/$GW_PID/status"
  stop "$GW_PID"; stop "$pid"
}
idle=$(rss_with 0)
full=$(rss_with 10000)
echo "| resources | gateway RSS KiB | over idle KiB | per resource |"
echo "|---|---|---|---|"
echo "| 0 | $idle | — | — |"
echo "| 10,000 | $full | $((full - idle)) | $(( (full - idle) * 1024 / 10000 )) B |"
