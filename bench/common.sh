# Shared by the benchmarks (sourced from the repository root): a work directory and the
# background processes, both cleaned up on exit; free loopback ports; oha, installed once; the
# shipped gateway and bare forwarder.
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

# Waits until URL answers at all (30 s at most).
wait_http() { for _ in $(seq 300); do curl -s -o /dev/null "$1" && return 0; sleep 0.1; done; echo "not up: $1" >&2; exit 1; }

# CPU time a process has used (user + system, in clock ticks); 0 for no process.
cpu_ticks() { if [ -n "$1" ]; then awk '{print $14 + $15}' "/proc/$1/stat"; else echo 0; fi; }

# write_calls FILE COUNT: COUNT lines, each a tools/call of the demo server's price_lookup with
# distinct arguments (a `nonce`), so neither the cache nor in-flight sharing answers any of them.
write_calls() {
  python3 - "$1" "$2" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    for i in range(int(sys.argv[2])):
        f.write('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"price_lookup",'
                '"arguments":{"manga_id":"MNG-00000001","nonce":%d}}}\n' % (i, i))
PY
}

need_oha() {
  [ -x "$OHA" ] || { echo "==> installing oha (once, ~10 min)"; cargo install oha --locked --root "$TOOLS"; }
}

# The gateway is built as it ships (scripts/build-dist.sh: the `dist` profile with the
# optimisation profile of bench/pgo.sh when pgo/ has one; BENCH_NO_PGO=1: without). The
# forwarder is built with the same `dist` profile but no optimisation profile: it stands for a
# bare hyper forwarder as anyone would build it for production.
build_gateway_and_forwarder() {
  local target=${CARGO_TARGET_DIR:-target}
  echo "==> building the forwarder (dist profile)"
  cargo build --profile dist --locked --quiet --example forwarder
  FWD=$target/dist/examples/forwarder
  # BENCH_BIN: a gateway binary built already (as scripts/build-dist.sh builds it).
  BIN=${BENCH_BIN:-$(DIST_NO_PGO=${BENCH_NO_PGO:-} bash scripts/build-dist.sh --quiet)}
}

# The rows' configurations, printed as TOML (one definition for overhead.sh, instructions.sh
# and pgo.sh). demo_toml UPSTREAM_PORT: the default configuration over the demo server.
demo_toml() { printf '[servers.demo]\ntransport = "http"\nurl = "http://127.0.0.1:%s/mcp"\n' "$1"; }
# full_toml UPSTREAM_PORT REDIS_PORT: plus the Redis registry tier, breaker state shared through
# Redis and a 60 s result cache (tracing is the environment's OTEL_EXPORTER_OTLP_ENDPOINT).
full_toml() {
  printf 'redis_url = "redis://127.0.0.1:%s"\nshared_breakers = true\n[defaults]\ncache_ttl_ms = 60000\n' "$2"
  demo_toml "$1"
}
# identity_toml UPSTREAM_PORT REDIS_PORT [FLEET_BATCH_MS]: plus JWTs from $ISSUER, the policy in
# $WORK/policy.cedar and a never-exhausted Redis quota per (caller, tool) (after start_identity).
identity_toml() {
  printf 'redis_url = "redis://127.0.0.1:%s"\n' "$2"
  printf '[auth]\nmode = "jwt"\nissuer = "%s"\naudience = "mcp-gateway"\njwks_url = "%s/jwks"\n' "$ISSUER" "$ISSUER"
  printf '[policy]\nfile = "%s"\n' "$WORK/policy.cedar"
  if [ -n "${3:-}" ]; then printf '[quotas]\nfleet_batch_ms = %s\n' "$3"; fi
  printf '[[quotas.rules]]\nname = "per-shopper-tool"\nscope = "tool"\nrate = 100000000\nwindow_secs = 1\n'
  demo_toml "$1"
}

# The identity rows' peers: the tests' OAuth server (ISSUER) and a token it issued to a
# shopper who may browse and buy (TOKEN), and a 20-rule Cedar policy in $WORK/policy.cedar.
start_identity() {
  node tests/peers/identity/oauth_server.mjs > "$WORK/oauth.log" 2>&1 & PIDS+=($!)
  for _ in $(seq 100); do grep -q '"issuer"' "$WORK/oauth.log" 2>/dev/null && break; sleep 0.1; done
  ISSUER=$(python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readline())["issuer"])' "$WORK/oauth.log")
  TOKEN=$(curl -s -X POST "$ISSUER/token" -d grant_type=client_credentials -d client_id=shopper-1 \
    -d 'scope=store:browse store:buy' -d aud=mcp-gateway | python3 -c 'import json,sys; print(json.load(sys.stdin)["access_token"])')
  python3 - "$WORK/policy.cedar" <<'CEDAR'
import sys
rules = [f'@id("deny-retired-{i}")\nforbid (principal, action == Action::"call", resource)\nwhen {{ resource.name == "retired_tool_{i}" }};\n' for i in range(18)]
rules.append('@id("browse")\npermit (principal, action == Action::"call", resource)\nwhen { resource.readOnly && principal.scopes.contains("store:browse") };\n')
rules.append('@id("buy")\npermit (principal, action == Action::"call", resource)\nwhen { principal.scopes.contains("store:buy") };\n')
open(sys.argv[1], "w").write("\n".join(rules))
CEDAR
}

# The REST upstream of the openapi rows (examples/rest_upstream.rs: the demo tool's price as
# `GET /prices/{manga_id}`), built like the forwarder: the `dist` profile, no optimisation profile.
build_rest_upstream() {
  local target=${CARGO_TARGET_DIR:-target}
  echo "==> building the REST upstream (dist profile)"
  cargo build --profile dist --locked --quiet --example rest_upstream
  RESTUP=$target/dist/examples/rest_upstream
}
# openapi_toml REST_PORT: the default configuration over that REST upstream, its one operation
# (`price_lookup`) a tool through `transport = "openapi"` (examples/rest_upstream.openapi.json).
openapi_toml() {
  printf '[servers.store]\ntransport = "openapi"\nspec = "%s"\nbase_url = "http://127.0.0.1:%s"\n' \
    "$(realpath examples/rest_upstream.openapi.json)" "$1"
}
