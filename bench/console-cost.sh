#!/usr/bin/env bash
# What the console's live refresh costs the gateway (docs/console.md, "What it costs"): the
# page polls GET /admin/overview and GET /admin/calls every 2 s. The gateway (`serve --demo`:
# the demo catalogue, the admin token from the environment, admin.recent_calls = 200) first
# answers 250 tools/call, so the record is full (200 calls); then, on one kept-alive
# connection each, N requests of each kind are sent and the CPU time the gateway process used
# (user + system, /proc/PID/stat) is divided by N; the same for N tools/call for comparison.
# With CALLGRIND=1 the gateway runs under valgrind's callgrind and the figure is instructions
# per request (counters zeroed before and dumped after each batch), which repeats run to run.
# Usage: bash bench/console-cost.sh [N]   (BIN=path/to/mcp-gateway; default: the debug build)
set -euo pipefail
cd "$(dirname "$0")/.."
N="${1:-1000}"
source bench/common.sh
BIN="${BIN:-${CARGO_TARGET_DIR:-target}/debug/mcp-gateway}"
PORT=$(free_port)
TOKEN="console-cost-admin-token-0123456789"
LAUNCH=("$BIN")
if [ -n "${CALLGRIND:-}" ]; then
  LAUNCH=(valgrind --tool=callgrind --callgrind-out-file="$WORK/callgrind.out" "$BIN")
fi
MCP_GATEWAY_ADMIN__TOKEN="$TOKEN" MCP_GATEWAY_LOG_LEVEL=warn AWS_EC2_METADATA_DISABLED=true \
  "${LAUNCH[@]}" serve --demo --listen "127.0.0.1:$PORT" > "$WORK/gateway.log" 2>&1 & PIDS+=($!)
GW=$!
for _ in $(seq 1200); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/readyz")" = 200 ] && break
  sleep 0.25
done
python3 - "$PORT" "$TOKEN" "$N" "$GW" "${CALLGRIND:-}" "$WORK/callgrind.out" <<'PY'
import http.client, json, os, subprocess, sys

port, token, n, pid, callgrind, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
ticks = os.sysconf("SC_CLK_TCK")

def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])

def connection():
    return http.client.HTTPConnection("127.0.0.1", int(port), timeout=120)

def call(conn, i):
    body = json.dumps({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "price_lookup", "arguments": {"manga_id": "MNG-00000001", "nonce": i}}})
    conn.request("POST", "/mcp", body, {"content-type": "application/json", "accept": "application/json"})
    r = conn.getresponse(); r.read(); assert r.status == 200

def admin(conn, path):
    conn.request("GET", path, headers={"authorization": f"Bearer {token}"})
    r = conn.getresponse(); body = r.read(); assert r.status == 200, (path, r.status); return body

def counted(name, step):
    conn = connection()
    step(conn, 0)  # the connection is open and warm
    if callgrind:
        subprocess.run(["callgrind_control", "-z", pid], check=True, capture_output=True)
    before = cpu()
    for i in range(n):
        step(conn, i + 1)
    used = cpu() - before
    figure = f"{used / ticks / n * 1e6:8.0f} µs CPU per request"
    if callgrind:
        subprocess.run(["callgrind_control", "-d", pid], check=True, capture_output=True)
        dumps = sorted(f for f in os.listdir(os.path.dirname(out)) if f.startswith("callgrind.out."))
        text = open(os.path.join(os.path.dirname(out), dumps[-1])).read()
        total = next(int(l.split()[1]) for l in text.splitlines() if l.startswith("summary:") or l.startswith("totals:"))
        figure = f"{total / n:12.0f} instructions per request"
    print(f"{name:<22} {figure}")

conn = connection()
for i in range(250):
    call(conn, 100000 + i)
record = json.loads(admin(conn, "/admin/calls"))
assert len(record["calls"]) == 200, len(record["calls"])
overview = admin(conn, "/admin/overview")
print(f"record: {len(record['calls'])} calls; /admin/calls {len(admin(conn, '/admin/calls'))} bytes, "
      f"/admin/overview {len(overview)} bytes; {n} requests each")
counted("GET /admin/overview", lambda c, i: admin(c, "/admin/overview"))
counted("GET /admin/calls", lambda c, i: admin(c, "/admin/calls"))
counted("tools/call (compare)", lambda c, i: call(c, 200000 + i))
PY
