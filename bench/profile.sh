#!/usr/bin/env bash
# Where a call's CPU goes at maximum rate, natively: `perf record` (cpu-clock sampling, DWARF
# call graphs) of the bare forwarder and then of the gateway (default configuration) while oha
# drives each at maximum rate (16 connections), against the demo upstream. Each process's CPU
# per call comes from /proc over the whole run; the samples split it into kernel work (by
# system call) and user-space work (by library: hyper, tokio, serde_json, the allocator, ...;
# for the gateway also by its own module). Writes bench/profile.md, and folded stacks (the
# input of flamegraph.pl, inferno-flamegraph or speedscope) to target/profile/.
#
# Why not bench/instructions.sh alone: callgrind counts user-space instructions one call at a
# time; at maximum rate half of each process's CPU is the kernel's TCP work and the cache is
# warm, so only a sampled native profile says what the maximum rate is made of.
# Usage: bash bench/profile.sh [seconds-per-run]   (needs perf: apt-get install linux-perf)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION="${1:-6}"
source bench/common.sh

command -v perf > /dev/null || { echo "perf is needed: apt-get install -y linux-perf" >&2; exit 1; }
need_oha
build_gateway_and_forwarder
FOLDED_DIR="${CARGO_TARGET_DIR:-target}/profile"
mkdir -p "$FOLDED_DIR"


UP=$(free_port); FW=$(free_port); GW=$(free_port)
"$BIN" demo-server --listen "127.0.0.1:$UP" > "$WORK/upstream.log" 2>&1 & PIDS+=($!)
wait_http "http://127.0.0.1:$UP/_stats"
"$FWD" "127.0.0.1:$FW" "http://127.0.0.1:$UP/mcp" > "$WORK/forwarder.log" 2>&1 & FW_PID=$!; PIDS+=($!)
demo_toml "$UP" > "$WORK/gateway.toml"
"$BIN" serve --config "$WORK/gateway.toml" --listen "127.0.0.1:$GW" > /dev/null 2>&1 & GW_PID=$!; PIDS+=($!)
wait_http "http://127.0.0.1:$GW/readyz"
write_calls "$WORK/calls.lines" 600000

# profile NAME PID PORT: oha at maximum rate, perf recording the middle of the run.
profile() {
  local name=$1 pid=$2 port=$3 before
  echo "==> $name at maximum rate (${DURATION}s), perf on pid $pid"
  "$OHA" --no-tui -z 2s -c 16 -m POST -T application/json -Z "$WORK/calls.lines" --output-format quiet "http://127.0.0.1:$port/mcp"
  before=$(cpu_ticks "$pid")
  ( sleep 1; perf record -q -e cpu-clock -F 2999 -g --call-graph dwarf,16384 -p "$pid" -o "$WORK/$name.perf" \
      -- sleep $((DURATION - 2)) > /dev/null 2>&1 ) & local recorder=$!
  "$OHA" --no-tui -z "${DURATION}s" -c 16 -m POST -T application/json -A 'application/json, text/event-stream' \
    -H 'MCP-Protocol-Version: 2025-06-18' -Z "$WORK/calls.lines" --output-format json -o "$WORK/$name.json" \
    "http://127.0.0.1:$port/mcp"
  echo "$(( $(cpu_ticks "$pid") - before ))" > "$WORK/$name.ticks"
  wait "$recorder"
  perf script -i "$WORK/$name.perf" -F ip,sym,dso 2> /dev/null > "$WORK/$name.stacks"
}
profile forwarder "$FW_PID" "$FW"
profile gateway "$GW_PID" "$GW"

python3 - "$WORK" "$FOLDED_DIR" <<'PY' | tee bench/profile.md
import collections, json, os, re, subprocess, sys
work, folded_dir = sys.argv[1:3]

# A user-space sample is charged to the library of the frame nearest its leaf whose crate is
# known: a function's own path, the self type of `<Type as Trait>::f` (the trait's crate when the
# type is generic), or for an inlined frame (`poll<hyper::...>`) its first type argument.
# core/alloc/std frames are looked through. The gateway's own frames are split by module.
BY_SYMBOL = [  # C code and std paths, recognised by name first
    ("allocator (mimalloc)", re.compile(r"^_?mi_|^_mi|malloc|^cfree|^__rustc::|__rust_(alloc|dealloc|realloc)")),
    ("memcpy / memcmp (libc)", re.compile(r"^__mem(move|cpy|cmp|set)")),
    ("clock reads", re.compile(r"clock_gettime|Timespec>::now")),
]
BY_CRATE = {
    **dict.fromkeys(["hyper", "hyper_util", "httparse", "http", "http_body", "http_body_util", "hyper_rustls", "bytes", "want"], "HTTP/1 (hyper, httparse, http, bytes)"),
    **dict.fromkeys(["tokio", "mio"], "tokio (I/O, scheduler, timers, sync)"),
    **dict.fromkeys(["serde_json", "serde_core", "serde"], "JSON (serde_json)"),
    **dict.fromkeys(["axum", "axum_core", "tower", "tower_service", "tower_layer"], "axum, tower"),
    **dict.fromkeys(["tracing", "tracing_core", "tracing_subscriber"], "log line (tracing, JSON lines, log writer)"),
    **dict.fromkeys(["jsonschema", "referencing", "fancy_regex", "regex", "regex_automata"], "schema validation (jsonschema)"),
    "sha2": "argument hash (SHA-256)",
    "prometheus": "metrics (prometheus)",
}
OWN = [  # the gateway's modules that stand for a library's kind of work
    ("mcp_gateway::registry::hash", "argument hash (SHA-256)"),
    ("mcp_gateway::telemetry::json_lines", "log line (tracing, JSON lines, log writer)"),
    ("mcp_gateway::telemetry::lossy", "log line (tracing, JSON lines, log writer)"),
    ("mcp_gateway::telemetry::after_answer", "log line (tracing, JSON lines, log writer)"),
    ("mcp_gateway::main", "tokio (I/O, scheduler, timers, sync)"),  # the runtime's loop, inlined into main
]
OWN_CODE = "own code (the gateway's modules; the forwarder's main)"
TRANSPARENT = {"core", "alloc", "std", "futures_util", "futures_core", "pin_project_lite"}
PATH = re.compile(r"[a-z_][a-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+")

def split_as(inner):
    """`A as B>::f` → (A, B), at angle-bracket depth 0."""
    depth = 0
    for i, ch in enumerate(inner):
        depth += ch == "<"
        depth -= ch == ">"
        if depth == 0 and inner.startswith(" as ", i):
            return inner[:i], inner[i + 4:]
    return inner, ""

def frame_path(sym):
    """The path that says whose code a frame is (None: cannot tell)."""
    sym = sym.replace("_as_", " as ")  # folded stacks write spaces as `_`
    if sym.startswith("<"):
        self_type, trait = split_as(sym[1:])
        self_type = re.sub(r"^(?:&|mut |dyn |\()+", "", self_type)
        m = PATH.match(self_type)
        if m and m.group(0).split("::")[0] not in TRANSPARENT:
            return m.group(0)
        m = PATH.match(trait)
        return m.group(0) if m else None
    m = PATH.match(sym)
    if m:
        return m.group(0)
    m = PATH.search(sym.split("<", 1)[1]) if "<" in sym else None  # an inlined generic frame
    return m.group(0) if m else None

def library_of(stack):
    """(bucket, the gateway's module or None) of a user-space sample."""
    for sym, _ in stack:
        hit = next((label for label, pattern in BY_SYMBOL if pattern.search(sym)), None)
        if hit:
            return hit, None
        path = frame_path(sym)
        if not path or path.split("::")[0] in TRANSPARENT:
            continue
        crate = path.split("::")[0]
        if crate == "mcp_gateway":
            module = "::".join(p for p in path.split("::")[:3] if p[:1].islower())
            own = next((label for prefix, label in OWN if module.startswith(prefix)), None)
            return own or OWN_CODE, module
        if crate == "forwarder":
            return OWN_CODE, None
        return BY_CRATE.get(crate, "other libraries"), None
    return "other user space", None
SYSCALL = re.compile(r"__x64_sys_(\w+)|__(?:do_)?sys_(\w+)")

def samples(path):
    stack = []
    for line in open(path, errors="replace"):
        line = line.strip()
        if not line:
            if stack:
                yield stack
                stack = []
            continue
        parts = line.split(" ", 1)
        if len(parts) < 2:
            continue
        m = re.match(r"(.*) \(([^()]*)\)$", parts[1])
        stack.append((m.group(1), m.group(2)) if m else (parts[1], ""))
    if stack:
        yield stack

def analyse(name):
    d = json.load(open(f"{work}/{name}.json"))
    calls = sum(d["statusCodeDistribution"].values())
    cpu_us = int(open(f"{work}/{name}.ticks").read()) * 1e6 / os.sysconf("SC_CLK_TCK") / calls
    buckets, modules, folded = collections.Counter(), collections.Counter(), collections.Counter()
    n = 0
    for stack in samples(f"{work}/{name}.stacks"):
        n += 1
        folded[";".join(re.sub(r"[;\s]+", "_", s)[:200] for s, _ in reversed(stack))] += 1
        if "kernel" in stack[0][1]:
            call = next((m.group(1) or m.group(2) for s, d in stack if "kernel" in d for m in [SYSCALL.search(s)] if m), None)
            buckets["kernel: " + (f"`{call}`" if call else "interrupts, softirq, scheduling")] += 1
            continue
        label, module = library_of(stack)
        buckets[label] += 1
        if label == OWN_CODE and module:
            modules[module] += 1
    with open(f"{folded_dir}/{name}.folded", "w") as f:
        for stack, count in folded.items():
            f.write(f"{stack} {count}\n")
    return {"calls_per_s": d["summary"]["requestsPerSec"], "cpu_us": cpu_us, "n": n, "buckets": buckets, "modules": modules}

fw, gw = analyse("forwarder"), analyse("gateway")
us = lambda r, count: r["cpu_us"] * count / max(r["n"], 1)
cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"], capture_output=True, text=True).stdout.strip()
date = subprocess.run(["date", "-u", "+%Y-%m-%d %H:%M"], capture_output=True, text=True).stdout.strip()
print("# Where a call's CPU goes at maximum rate (perf)\n")
print(f"`bash bench/profile.sh`, {date} UTC, {cpu}: oha at maximum rate over 16 connections against the demo "
      f"upstream; perf samples (cpu-clock, DWARF call graphs) of each process in the middle of its run, "
      f"its CPU per call from /proc over the run. The forwarder ran at {fw['calls_per_s']:,.0f} calls/s "
      f"({fw['n']:,} samples), the gateway at {gw['calls_per_s']:,.0f} ({gw['n']:,} samples); perf itself "
      f"slows both a little. Folded stacks for flame graphs: `target/profile/{{forwarder,gateway}}.folded`.\n")
print("| where (µs of CPU per call) | forwarder | gateway | gateway − forwarder |\n|---|---:|---:|---:|")
rows = sorted(set(fw["buckets"]) | set(gw["buckets"]), key=lambda k: (not k.startswith("kernel"), -us(gw, gw["buckets"][k])))
for group, pick in (("kernel", lambda k: k.startswith("kernel")), ("user space", lambda k: not k.startswith("kernel"))):
    f_sum = sum(us(fw, fw["buckets"][k]) for k in rows if pick(k))
    g_sum = sum(us(gw, gw["buckets"][k]) for k in rows if pick(k))
    print(f"| **{group}** | **{f_sum:.1f}** | **{g_sum:.1f}** | **{g_sum - f_sum:+.1f}** |")
    for k in rows:
        if pick(k):
            a, b = us(fw, fw["buckets"][k]), us(gw, gw["buckets"][k])
            if max(a, b) >= 0.05:
                print(f"| {k} | {a:.2f} | {b:.2f} | {b - a:+.2f} |")
print(f"| **total** | **{fw['cpu_us']:.1f}** | **{gw['cpu_us']:.1f}** | **{gw['cpu_us'] - fw['cpu_us']:+.1f}** |\n")
print("The gateway's own code by module (µs per call; library code inlined into a gateway "
      "function counts as that function's):\n")
print("| µs per call | module |\n|---:|---|")
for module, count in gw["modules"].most_common(15):
    print(f"| {us(gw, count):.2f} | `{module}` |")
PY
