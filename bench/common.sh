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

# The gateway is built as it ships: with the profile of bench/pgo.sh when pgo/ has one
# (BENCH_NO_PGO=1: without), in its own target directory so the two builds do not undo each
# other. The forwarder is built plainly: it stands for a bare hyper forwarder as anyone would
# build it.
build_gateway_and_forwarder() {
  local target=${CARGO_TARGET_DIR:-target}
  echo "==> building the forwarder (release)"
  cargo build --release --locked --quiet --example forwarder
  FWD=$target/release/examples/forwarder
  if [ -f pgo/mcp-gateway.profdata ] && [ -z "${BENCH_NO_PGO:-}" ]; then
    echo "==> building mcp-gateway (release, with pgo/mcp-gateway.profdata)"
    CARGO_TARGET_DIR="$target/pgo-use" RUSTFLAGS="$(pgo_rustflags)" \
      cargo build --release --locked --quiet --bin mcp-gateway
    BIN=$target/pgo-use/release/mcp-gateway
  else
    echo "==> building mcp-gateway (release)"
    cargo build --release --locked --quiet --bin mcp-gateway
    BIN=$target/release/mcp-gateway
  fi
}

# The flags of a profile-guided build (functions changed since the profile was taken are
# compiled without it, silently).
pgo_rustflags() {
  echo "-Cprofile-use=$PWD/pgo/mcp-gateway.profdata -Cllvm-args=-no-pgo-warn-mismatch"
}
