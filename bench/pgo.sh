#!/usr/bin/env bash
# Profile-guided optimisation: records which code a gateway under its typical load runs, and
# writes the merged profile to pgo/mcp-gateway.profdata, which the shipped build uses
# (scripts/build-dist.sh, the Dockerfile: `-Cprofile-use` on the `dist` profile). The latency a call adds at a steady
# rate is mostly the gateway's code and data coming back into the caches after an idle
# gap; the profile lets LLVM lay the hot path out together and inline along it.
#
# The training load (through the demo server, like the overhead benchmark): tools/call from
# session-era and 2026-07-28 callers, invalid arguments, unknown tools, tools/list, and a
# paced load, through the default configuration; then, as bench/overhead.sh's feature rows,
# a smaller load through the full stack (Redis registry tier, result cache, shared breakers,
# OpenTelemetry exporting every call) and through identity + policy + quotas (a JWT from the
# tests' OAuth server on every call), so the paths users turn on are laid out too.
# Re-run it after a large change to the per-call path; a stale profile still applies to the
# functions that did not change (LLVM skips the ones whose shape changed).
# Usage: bash bench/pgo.sh   (needs llvm-profdata matching rustc's LLVM major or older
# readable by it: Debian's llvm-19 is installed when missing)
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/common.sh
need_oha

PROFDATA=$(command -v llvm-profdata-19 || true)
if [ -z "$PROFDATA" ]; then
  echo "==> installing llvm-19 (llvm-profdata)"
  sudo_cmd=""; [ "$(id -u)" -eq 0 ] || sudo_cmd=sudo
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends llvm-19 > /dev/null
  PROFDATA=$(command -v llvm-profdata-19)
fi

GEN_TARGET="${CARGO_TARGET_DIR:-target}/pgo-generate"
RAW="$WORK/raw"
echo "==> building an instrumented gateway (dist profile, as the shipped build; ~10 min the first time)"
# A fixed default path (the runs set LLVM_PROFILE_FILE), so RUSTFLAGS stay the same from run
# to run and cargo rebuilds only what changed; build scripts run during the build write there.
mkdir -p "$GEN_TARGET"
BUILD_PROFILES="$(cd "$GEN_TARGET" && pwd)/build-profiles"
CARGO_TARGET_DIR="$GEN_TARGET" RUSTFLAGS="-Cprofile-generate=$BUILD_PROFILES" \
  cargo build --profile dist --locked --quiet --bin mcp-gateway
GEN_BIN="$GEN_TARGET/dist/mcp-gateway"

UP=$(free_port); GW=$(free_port)
# The upstream is not instrumented data: only the gateway's process writes to $RAW.
DEMO="${CARGO_TARGET_DIR:-target}/dist/mcp-gateway"
[ -x "$DEMO" ] || DEMO="$GEN_BIN"
LLVM_PROFILE_FILE=/dev/null "$DEMO" demo-server --listen "127.0.0.1:$UP" > /dev/null 2>&1 & PIDS+=($!)
demo_toml "$UP" > "$WORK/gateway.toml"
LLVM_PROFILE_FILE="$RAW/gateway-%p.profraw" "$GEN_BIN" serve --config "$WORK/gateway.toml" --listen "127.0.0.1:$GW" \
  > /dev/null 2>&1 & GW_PID=$!
wait_http "http://127.0.0.1:$GW/readyz"

python3 - "$WORK" <<'PY'
import json, sys
work = sys.argv[1]
def write(name, make, n=50000):
    with open(f"{work}/{name}.lines", "w") as f:
        for i in range(n):
            f.write(json.dumps(make(i), separators=(",", ":")) + "\n")
def call(i, args, **extra):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "price_lookup", "arguments": args, **extra}}
write("legacy", lambda i: call(i, {"manga_id": "MNG-00000001", "nonce": i}))
write("modern", lambda i: call(i, {"manga_id": "MNG-00000002", "nonce": i},
                               _meta={"io.modelcontextprotocol/protocolVersion": "2026-07-28"}))
write("invalid", lambda i: call(i, {"manga_id": 42}), 2000)
write("unknown", lambda i: {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": "no_such_tool", "arguments": {}}}, 2000)
write("list", lambda i: {"jsonrpc": "2.0", "id": i, "method": "tools/list"}, 2000)
PY
load() { # lines calls extra-oha-args...
  local lines=$1 n=$2; shift 2
  echo "==> training: $n × $lines"
  "$OHA" --no-tui -n "$n" -c 8 -m POST -T application/json -A 'application/json, text/event-stream' \
    -Z "$WORK/$lines.lines" --output-format json -o "$WORK/train.json" "$@" "http://127.0.0.1:$GW/mcp"
  # Every answer is HTTP 200 (JSON-RPC errors included): a refused token or a gateway that went
  # away would train the wrong path.
  python3 - "$WORK/train.json" "$n" <<'PY'
import json, sys
codes = json.load(open(sys.argv[1]))["statusCodeDistribution"]
if codes != {"200": int(sys.argv[2])}:
    sys.exit(f"training load not answered as expected: {codes}")
PY
}
load legacy 30000 -H 'MCP-Protocol-Version: 2025-06-18'
load modern 10000 -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: price_lookup'
load invalid 1000
load unknown 500
load list 500
load legacy 2000 -q 500   # a paced load too: calls arriving one by one, as at a steady rate

kill -TERM "$GW_PID"; wait "$GW_PID" || true

# The feature rows: the same instrumented binary under the full stack, then identity.
command -v redis-server > /dev/null || { echo "redis-server is needed to train the feature rows" >&2; exit 1; }
RP=$(free_port); OTLP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no > /dev/null 2>&1 & PIDS+=($!)
OTELPY=tests/peers/.venv-otel/bin/python
[ -x "$OTELPY" ] || bash scripts/install-test-deps.sh
"$OTELPY" -u tests/peers/receivers/otlp_receiver.py "$OTLP" --count > /dev/null 2>&1 & PIDS+=($!)
wait_http "http://127.0.0.1:$OTLP/_count"
full_toml "$UP" "$RP" > "$WORK/full.toml"
start_identity
identity_toml "$UP" "$RP" > "$WORK/identity.toml"
# train CONFIG [env...]: the instrumented gateway under CONFIG, trained, then stopped.
train() {
  local config=$1; shift
  env "$@" LLVM_PROFILE_FILE="$RAW/gateway-%p.profraw" "$GEN_BIN" serve --config "$config" --listen "127.0.0.1:$GW" \
    > /dev/null 2>&1 & GW_PID=$!
  wait_http "http://127.0.0.1:$GW/readyz"
}
train "$WORK/full.toml" OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP"
load legacy 8000 -H 'MCP-Protocol-Version: 2025-06-18'
load modern 2000 -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: price_lookup'
kill -TERM "$GW_PID"; wait "$GW_PID" || true
train "$WORK/identity.toml"
load legacy 8000 -H 'MCP-Protocol-Version: 2025-06-18' -H "Authorization: Bearer $TOKEN"
load modern 2000 -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: tools/call' -H 'Mcp-Name: price_lookup' \
  -H "Authorization: Bearer $TOKEN"
kill -TERM "$GW_PID"; wait "$GW_PID" || true
mkdir -p pgo
"$PROFDATA" merge --sparse -o pgo/mcp-gateway.profdata "$RAW"
echo "==> wrote pgo/mcp-gateway.profdata ($(du -h pgo/mcp-gateway.profdata | cut -f1))"
