#!/usr/bin/env bash
# Instructions per call, counted by valgrind's callgrind: the gateway's own cost measured
# without the noise of time. Latency on this kind of 2-core VM moves by 20-30% between runs
# of the same code; instruction counts repeat to within a few hundred per call, so this is
# the figure to compare before and after a change to the per-call path.
#
# The demo MCP server runs natively; the gateway (default configuration, JSON log line per
# call) and then the bare forwarder (examples/forwarder.rs) run under callgrind. Each gets
# 500 warm-up calls, then its counters are zeroed, CALLS calls are counted (oha, 4
# connections), and the counters are dumped. The result: instructions per call for each (the
# gateway for a JSON caller and for one accepting event streams), the gateway's own (the
# difference), and the gateway's 40 costliest functions (self cost) in bench/instructions.md.
# The forwarder is counted a second time with --read-json (it parses the request and the
# answer whole): what reading JSON alone costs any JSON-RPC-aware intermediary. Then the
# gateway with identity, policy and quotas on (as bench/overhead.sh's `identity` row: a JWT from
# a real OAuth server, 20 Cedar rules, a Redis-shared quota per caller and tool), twice: with
# the quota decided in Redis call by call (`fleet_batch_ms = 0`) and batched (the default).
# Redis's own work is not counted: it runs natively. Then the gateway with OpenTelemetry on
# (as overhead.sh's `traced` row: every call sampled, a server and a client span each,
# batch-exported over OTLP/HTTP to the tests' receiver, which runs natively); the export's
# encoding and sending happen in the gateway and are counted. Then the full stack (as
# overhead.sh's `full` row).
# Usage: bash bench/instructions.sh [calls]   (needs valgrind: apt-get install valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
CALLS="${1:-2000}"
source bench/common.sh

command -v valgrind > /dev/null || { echo "valgrind is needed: apt-get install -y valgrind" >&2; exit 1; }
need_oha
build_gateway_and_forwarder

UP=$(free_port)
"$BIN" demo-server --listen "127.0.0.1:$UP" > "$WORK/upstream.log" 2>&1 & PIDS+=($!)
demo_toml "$UP" > "$WORK/gateway.toml"
write_calls "$WORK/calls.lines" 20000

# Headers every counted call carries besides Content-Type and Accept (the identity runs' token).
HEADERS=()

# count NAME ACCEPT COMMAND...: prints the instructions per call of COMMAND, which listens on
# the address given where its arguments say @LISTEN@; the calls carry `Accept: ACCEPT`.
count() {
  local name=$1 accept=$2; shift 2
  local port; port=$(free_port)
  local args=("${@//@LISTEN@/127.0.0.1:$port}")
  local out="$WORK/callgrind.$name"
  MCP_GATEWAY_LOG_LEVEL=info valgrind --tool=callgrind --callgrind-out-file="$out" "${args[@]}" \
    > "$WORK/$name.log" 2>&1 & local pid=$!
  local ping='{"jsonrpc":"2.0","id":1,"method":"ping"}'
  for _ in $(seq 600); do
    curl -s -o /dev/null -X POST -H 'content-type: application/json' -d "$ping" "http://127.0.0.1:$port/mcp" && break
    sleep 0.2
  done
  "$OHA" --no-tui -n 500 -c 4 -m POST -T application/json -A "$accept" "${HEADERS[@]}" -Z "$WORK/calls.lines" --output-format quiet "http://127.0.0.1:$port/mcp"
  callgrind_control -z "$pid" > /dev/null
  "$OHA" --no-tui -n "$CALLS" -c 4 -m POST -T application/json -A "$accept" "${HEADERS[@]}" -Z "$WORK/calls.lines" --output-format json \
    -o "$WORK/$name.json" "http://127.0.0.1:$port/mcp"
  callgrind_control -d "$pid" > /dev/null
  sleep 0.5
  kill "$pid"; wait "$pid" 2>/dev/null || true
  python3 - "$WORK/$name.json" "$CALLS" <<'PY'
import json, sys
codes = json.load(open(sys.argv[1]))["statusCodeDistribution"]
if codes != {"200": int(sys.argv[2])}:
    sys.exit(f"not every call succeeded: {codes}")
PY
  # The dump after zeroing is the first numbered part.
  local dump; dump=$(ls "$out".* | sort | head -1)
  callgrind_annotate --threshold=100 --auto=no --inclusive=no "$dump" > "$WORK/$name.txt" 2>/dev/null
  python3 - "$WORK/$name.txt" "$CALLS" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
total = int(re.search(r"([\d,]+) \(100\.0%\)\s+PROGRAM TOTALS", text).group(1).replace(",", ""))
print(round(total / int(sys.argv[2])))
PY
}

# A caller that accepts only JSON (the store's orchestrator), then one that also accepts event
# streams, as the SDK clients and bench/overhead.sh do: the gateway then offers it progress and
# log entries, which costs a channel per call.
echo "==> gateway under callgrind ($CALLS counted calls, JSON caller)"
GW_IR=$(count gateway 'application/json' "$BIN" serve --config "$WORK/gateway.toml" --listen @LISTEN@)
echo "==> gateway under callgrind ($CALLS counted calls, caller accepting event streams)"
SSE_IR=$(count gateway-sse 'application/json, text/event-stream' "$BIN" serve --config "$WORK/gateway.toml" --listen @LISTEN@)
echo "==> forwarder under callgrind ($CALLS counted calls)"
FW_IR=$(count forwarder 'application/json' "$FWD" @LISTEN@ "http://127.0.0.1:$UP/mcp")
echo "==> forwarder reading JSON under callgrind ($CALLS counted calls)"
JFW_IR=$(count json-forwarder 'application/json' "$FWD" @LISTEN@ "http://127.0.0.1:$UP/mcp" --read-json)

# Identity, policy and quotas: the OAuth server of the tests, a Redis, the benchmark's policy.
RP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no > "$WORK/redis.log" 2>&1 & PIDS+=($!)
start_identity
identity_toml "$UP" "$RP" 0 > "$WORK/identity-0.toml"
identity_toml "$UP" "$RP" 10 > "$WORK/identity-10.toml"
HEADERS=(-H "Authorization: Bearer $TOKEN")
echo "==> gateway with identity, policy and a quota decided in Redis per call, under callgrind"
ID0_IR=$(count identity-per-call 'application/json' "$BIN" serve --config "$WORK/identity-0.toml" --listen @LISTEN@)
echo "==> gateway with identity, policy and a batched quota, under callgrind"
ID_IR=$(count identity 'application/json' "$BIN" serve --config "$WORK/identity-10.toml" --listen @LISTEN@)
HEADERS=()

# Tracing on: the tests' OTLP receiver (scripts/install-test-deps.sh installs its venv).
OTLP=$(free_port)
OTELPY=tests/peers/.venv-otel/bin/python
[ -x "$OTELPY" ] || bash scripts/install-test-deps.sh
"$OTELPY" -u tests/peers/receivers/otlp_receiver.py "$OTLP" --count > "$WORK/otlp.log" 2>&1 & PIDS+=($!)
wait_http "http://127.0.0.1:$OTLP/_count"
echo "==> gateway with OpenTelemetry on (every call sampled and exported), under callgrind"
TR_IR=$(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP" count traced 'application/json' "$BIN" serve --config "$WORK/gateway.toml" --listen @LISTEN@)
# The full stack, as overhead.sh's `full` row: Redis registry tier, a 60 s result cache (every
# counted call has its own arguments, so each is a miss whose result is stored), breaker state
# shared through Redis, and tracing as above.
full_toml "$UP" "$RP" > "$WORK/full.toml"
echo "==> gateway with the full stack (Redis tier, result cache, shared breakers, tracing), under callgrind"
FULL_IR=$(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$OTLP" count full 'application/json' "$BIN" serve --config "$WORK/full.toml" --listen @LISTEN@)

python3 - "$WORK/gateway.txt" "$CALLS" "$GW_IR" "$FW_IR" "$SSE_IR" "$JFW_IR" "$ID0_IR" "$ID_IR" "$WORK/identity.txt" "$TR_IR" "$WORK/traced.txt" "$FULL_IR" "$WORK/full.txt" <<'PY' | tee bench/instructions.md
import re, sys
path, calls, gw, fw, sse, jfw = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
id0, idb, id_path = int(sys.argv[7]), int(sys.argv[8]), sys.argv[9]
traced, traced_path = int(sys.argv[10]), sys.argv[11]
full, full_path = int(sys.argv[12]), sys.argv[13]
print("# Instructions per call (callgrind)\n")
print(f"`bash bench/instructions.sh {calls}`: one `tools/call` of the demo server's `price_lookup`, "
      "counted over the calls after 500 warm-up calls.\n")
print("| path | instructions per call |\n|---|---:|")
print(f"| bare forwarder | {fw:,} |")
print(f"| forwarder reading JSON (`--read-json`: request and answer parsed whole) | {jfw:,} |")
print(f"| reading JSON alone (difference) | {jfw - fw:,} |")
print(f"| gateway, default configuration | {gw:,} |")
print(f"| the gateway's own (difference) | {gw - fw:,} |")
print(f"| gateway, caller accepting event streams (`Accept: application/json, text/event-stream`) | {sse:,} |")
print(f"| the gateway's own for that caller | {sse - fw:,} |")
print(f"| gateway, identity + policy + quota decided in Redis per call (`fleet_batch_ms = 0`) | {id0:,} |")
print(f"| gateway, identity + policy + quota batched (`fleet_batch_ms = 10`, the default) | {idb:,} |")
print(f"| identity + policy + quota over the default configuration (batched) | {idb - gw:,} ({idb / gw:.2f}x) |")
print(f"| gateway, OpenTelemetry on (every call sampled and exported over OTLP/HTTP) | {traced:,} |")
print(f"| tracing over the default configuration | {traced - gw:,} ({traced / gw:.2f}x) |")
print(f"| gateway, full stack (Redis registry tier, 60 s result cache, shared breakers, tracing) | {full:,} |")
print(f"| full stack over the default configuration | {full - gw:,} ({full / gw:.2f}x) |")
print(f"| full stack over tracing alone | {full - traced:,} |\n")
print("The gateway's costliest functions (JSON caller, self cost per call; valgrind runs SHA-256 without the "
      "CPU's SHA extensions, so `sha2` weighs more here than natively):\n")
print("| instructions per call | function |\n|---:|---|")
def top(path, total, limit):
    rows = 0
    for line in open(path):
        m = re.match(r"\s*([\d,]+) \(\s*[\d.]+%\)\s+(\S.*)$", line)
        if not m or "PROGRAM TOTALS" in line:
            continue
        cost = int(m.group(1).replace(",", "")) / calls
        if cost > 0.5 * total:
            continue  # `main` and the frames above it: inclusive by nature, not a cost of their own
        name = re.sub(r" \[[^]]*\]$", "", m.group(2)).split(":", 1)[-1].replace("|", "\\|")
        print(f"| {cost:,.0f} | `{name[:120]}` |")
        rows += 1
        if rows == limit:
            break
top(path, gw, 40)
print("\nWith identity, policy and the batched quota (self cost per call):\n")
print("| instructions per call | function |\n|---:|---|")
top(id_path, idb, 25)
print("\nWith OpenTelemetry on (self cost per call):\n")
print("| instructions per call | function |\n|---:|---|")
top(traced_path, traced, 25)
print("\nWith the full stack (self cost per call):\n")
print("| instructions per call | function |\n|---:|---|")
top(full_path, full, 25)
PY
