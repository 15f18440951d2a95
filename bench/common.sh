# Shared by the benchmarks (sourced from the repository root): a work directory and the
# background processes, both cleaned up on exit; free loopback ports; oha, installed once; the
# release gateway and bare forwarder.
TOOLS="${BENCH_TOOLS:-/opt/benchtools}"
OHA="$TOOLS/bin/oha"
WORK="$(mktemp -d)"
PIDS=()
# BENCH_KEEP_WORK=1 keeps the work directory (callgrind dumps, oha outputs, logs) for a look.
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  if [ -n "${BENCH_KEEP_WORK:-}" ]; then echo "work directory kept: $WORK" >&2; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

need_oha() {
  [ -x "$OHA" ] || { echo "==> installing oha (once, ~10 min)"; cargo install oha --locked --root "$TOOLS"; }
}

build_gateway_and_forwarder() {
  echo "==> building mcp-gateway and the forwarder (release)"
  cargo build --release --locked --quiet --bin mcp-gateway --example forwarder
  BIN=${CARGO_TARGET_DIR:-target}/release/mcp-gateway
  FWD=${CARGO_TARGET_DIR:-target}/release/examples/forwarder
}
