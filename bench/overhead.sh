#!/usr/bin/env bash
# Overhead benchmark: the same trivial tool call (demo server `price_lookup`) sent
#   1. directly to the upstream (the demo MCP server, a trivial Rust upstream),
#   2. through mcp-gateway with the full stack (validation, breaker, retry, limits, metrics, logs),
#   3. through mcp-gateway configured as a pass-through (breaker/retry/limits/budget off),
#   3b. through mcp-gateway with the full stack and OpenTelemetry tracing on (every call sampled,
#      spans exported over OTLP/HTTP to tests/peers/otlp_receiver.py in counting mode),
#   4. through mcp-proxy (crates.io), the fastest Rust MCP proxy we found, same upstream,
# with oha at a fixed 1,000 calls/s with coordinated-omission correction, then at maximum rate.
# Reports p50/p99 latency, added latency vs direct, throughput, and the gateway's RSS.
# Usage: bash bench/overhead.sh [seconds-per-run]   (writes bench/results.md)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-20}"
TOOLS="${BENCH_TOOLS:-/opt/benchtools}"
OHA="$TOOLS/bin/oha"
PROXY="$TOOLS/bin/mcp-proxy"
WORK="$(mktemp -d)"
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT

[ -x "$OHA" ] || { echo "==> installing oha (once, ~10 min)"; cargo install oha --locked --root "$TOOLS"; }
[ -x "$PROXY" ] || { echo "==> installing mcp-proxy 0.6.0 (once, ~10 min)"; cargo install mcp-proxy --version 0.6.0 --locked --root "$TOOLS"; }
echo "==> building mcp-gateway (release)"
cargo build --release --locked --quiet
BIN=target/release/mcp-gateway

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; echo "not up: $1" >&2; exit 1; }

UP=$(free_port); GW=$(free_port); GWP=$(free_port); PX=$(free_port); GWT=$(free_port); OTLP=$(free_port)
"$BIN" demo-server --listen "127.0.0.1:$UP" > "$WORK/upstream.log" 2>&1 & PIDS+=($!)
wait_http "http://127.0.0.1:$UP/_stats"

cat > "$WORK/full.toml" <<TOML
[servers.demo]
transport = "http"
url = "http://127.0.0.1:$UP/mcp"
TOML
cat > "$WORK/passthrough.toml" <<TOML
[defaults]
max_concurrency = 100000
max_result_bytes = 0
[defaults.retry]
max_retries_safe = 0
[defaults.breaker]
enabled = false
[servers.demo]
transport = "http"
url = "http://127.0.0.1:$UP/mcp"
TOML
"$BIN" serve --config "$WORK/full.toml" --listen "127.0.0.1:$GW" > "$WORK/gateway.log" 2>&1 & GW_PID=$!; PIDS+=($GW_PID)
"$BIN" serve --config "$WORK/passthrough.toml" --listen "127.0.0.1:$GWP" > /dev/null 2>&1 & PIDS+=($!)
# Tracing on: the OTLP receiver of the tests (scripts/install-test-deps.sh installs its venv),
# counting spans instead of writing them.
OTELPY=tests/peers/.venv-otel/bin/python
[ -x "$OTELPY" ] || bash scripts/install-test-deps.sh
"$OTELPY" -u tests/peers/otlp_receiver.py "$OTLP" --count > "$WORK/otlp.log" 2>&1 & PIDS+=($!)
wait_http "http://127.0.0.1:$OTLP/_count"
OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP" "$BIN" serve --config "$WORK/full.toml" --listen "127.0.0.1:$GWT" > /dev/null 2>&1 & PIDS+=($!)
sed "s/port = 8081/port = $PX/; s#http://127.0.0.1:9100/mcp#http://127.0.0.1:$UP/mcp#" bench/competitor-config.toml > "$WORK/proxy.toml"
"$PROXY" --config "$WORK/proxy.toml" > "$WORK/proxy.log" 2>&1 & PIDS+=($!)
wait_http "http://127.0.0.1:$GW/readyz"; wait_http "http://127.0.0.1:$GWP/readyz"; wait_http "http://127.0.0.1:$GWT/readyz"
for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$PX/" -X POST && break; sleep 0.1; done
sleep 1
IDLE_RSS=$(awk '/VmRSS/{print $2}' "/proc/$GW_PID/status")

# mcp-proxy wants a session (one shared by all connections, as in its own benchmark).
SID=$(curl -s -i -X POST "http://127.0.0.1:$PX/" -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' \
  -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}' \
  | awk -F': ' 'tolower($1)=="mcp-session-id"{print $2}' | tr -d '\r')
curl -s -o /dev/null -X POST "http://127.0.0.1:$PX/" -H 'content-type: application/json' -H "mcp-session-id: $SID" -H 'mcp-protocol-version: 2025-06-18' \
  -d '{"jsonrpc":"2.0","method":"notifications/initialized"}'

# Every request carries a distinct `nonce` argument (valid for the schema, ignored by the tool) so
# the gateway's in-flight sharing of identical read-only calls cannot flatter its numbers.
body() {
  python3 -c 'import sys
name, out = sys.argv[1], sys.argv[2]
with open(out, "w") as f:
    for i in range(300000):
        f.write("{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":{\"manga_id\":\"MNG-00000001\",\"nonce\":%d}}}\n" % (i, name, i))' "$1" "$WORK/$2.lines"
  head -n 1 "$WORK/$2.lines" > "$WORK/$2.json"
}
body price_lookup plain; body b/price_lookup proxied
check() { # every target must really answer the tool call
  local out; out=$(curl -s -X POST "$1" -H 'content-type: application/json' -H 'accept: application/json, text/event-stream' ${3:+-H "mcp-session-id: $3"} -H 'mcp-protocol-version: 2025-06-18' --data @"$WORK/$2.json")
  echo "$out" | grep -q '"retail_price":528' || { echo "target $1 does not answer the call: $out" >&2; exit 1; }
}
check "http://127.0.0.1:$UP/mcp" plain; check "http://127.0.0.1:$GW/mcp" plain; check "http://127.0.0.1:$GWP/mcp" plain; check "http://127.0.0.1:$GWT/mcp" plain; check "http://127.0.0.1:$PX/" proxied "$SID"

run() { # name url body mode(fixed|max) [session]
  local args=(--no-tui -z "${DURATION}s" -w -c 50 -m POST -T application/json -A 'application/json, text/event-stream'
              -H 'MCP-Protocol-Version: 2025-06-18' -Z "$WORK/$3.lines" --output-format json -o "$WORK/$1-$4.json")
  [ "$4" = fixed ] && args+=(-q 1000 --latency-correction)
  [ -n "${5:-}" ] && args+=(-H "Mcp-Session-Id: $5")
  echo "==> $1 ($4 rate, ${DURATION}s)"
  "$OHA" "${args[@]}" "$2"
}
for mode in fixed max; do
  run direct "http://127.0.0.1:$UP/mcp" plain $mode
  run gateway "http://127.0.0.1:$GW/mcp" plain $mode
  run passthrough "http://127.0.0.1:$GWP/mcp" plain $mode
  run gateway+tracing "http://127.0.0.1:$GWT/mcp" plain $mode
  run mcp-proxy "http://127.0.0.1:$PX/" proxied $mode "$SID"
done
echo "==> gateway RSS at 256 connections"
"$OHA" --no-tui -z 10s -c 256 -m POST -T application/json -Z "$WORK/plain.lines" --output-format quiet "http://127.0.0.1:$GW/mcp" &
OHA_PID=$!; sleep 6; LOADED_RSS=$(awk '/VmRSS/{print $2}' "/proc/$GW_PID/status"); wait $OHA_PID || true

sleep 6 # the batch exporter's schedule delay (5 s): the last spans reach the receiver
SPANS=$(curl -s "http://127.0.0.1:$OTLP/_count")

python3 - "$WORK" "$IDLE_RSS" "$LOADED_RSS" "$DURATION" "$SPANS" <<'PY' | tee bench/results.md
import json, sys, platform, subprocess
work, idle, loaded, duration, spans = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def load(name, mode):
    d = json.load(open(f"{work}/{name}-{mode}.json"))
    codes = d.get("statusCodeDistribution", {})
    ok = sum(v for k, v in codes.items() if k == "200")
    total = sum(codes.values()) or 1
    p = d["latencyPercentiles"]
    return {"p50": p["p50"] * 1e6, "p99": p["p99"] * 1e6, "rps": d["summary"]["requestsPerSec"], "ok": ok / total}
names = ["direct", "gateway", "passthrough", "gateway+tracing", "mcp-proxy"]
fixed = {n: load(n, "fixed") for n in names}
peak = {n: load(n, "max") for n in names}
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
print(f"Measured {subprocess.run(['date','-u','+%Y-%m-%d'],capture_output=True,text=True).stdout.strip()} on {platform.machine()}, {cpu}, 2 cores; oha, 50 connections, {duration} s per run; upstream: the demo server (Rust), tool `price_lookup`.\n")
print("| path | p50 @1k/s (µs) | p99 @1k/s (µs) | added p50 (µs) | added p99 (µs) | max rate (calls/s) | vs direct | HTTP 200 |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for n in names:
    f, m = fixed[n], peak[n]
    add50 = "—" if n == "direct" else f"{f['p50'] - fixed['direct']['p50']:.0f}"
    add99 = "—" if n == "direct" else f"{f['p99'] - fixed['direct']['p99']:.0f}"
    print(f"| {n} | {f['p50']:.0f} | {f['p99']:.0f} | {add50} | {add99} | {m['rps']:.0f} | {m['rps'] / peak['direct']['rps']:.0%} | {min(f['ok'], m['ok']):.0%} |")
print(f"\nGateway resident memory: {idle / 1024:.1f} MiB idle, {loaded / 1024:.1f} MiB at 256 concurrent connections.")
print("Every request has distinct arguments (a `nonce`), so no call is served from the gateway's in-flight sharing.")
print(f"`gateway+tracing` = `gateway` with OpenTelemetry on (every call sampled: one server and one client span per call, batch-exported as OTLP/HTTP protobuf to a local receiver, which decoded {spans} spans); spans the batch queue (2,048) cannot hold are dropped, never waited for.")
print("`gateway` = default configuration (schema validation, breaker, budgeted retry, concurrency limit, attempt timeout, metrics, one JSON log line per call); `passthrough` = same binary with breaker, retries, limits and size budget configured off.")
PY
