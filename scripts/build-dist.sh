#!/usr/bin/env bash
# Builds the shipped binary: the `dist` profile (fat LTO, one codegen unit; Cargo.toml) with
# the profile-guided optimisation of pgo/mcp-gateway.profdata (bench/pgo.sh records it), as the
# Dockerfile builds it. Functions changed since the profile was taken are compiled without it.
# The build has its own target directory (<target>/pgo-use), so it and a build without the
# profile do not undo each other. Prints the binary's path on stdout; cargo's own output goes
# to stderr. Extra arguments go to cargo (e.g. --quiet).
#   DIST_NO_PGO=1   without the profile (into <target>/dist/)
# usage: bash scripts/build-dist.sh [cargo args…]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=${CARGO_TARGET_DIR:-target}
profile=pgo/mcp-gateway.profdata
if [ -f "$profile" ] && [ -z "${DIST_NO_PGO:-}" ]; then
  target="$target/pgo-use"
  echo "==> building mcp-gateway (dist profile, with $profile)" >&2
  CARGO_TARGET_DIR="$target" \
    RUSTFLAGS="-Cprofile-use=$PWD/$profile -Cllvm-args=-no-pgo-warn-mismatch" \
    cargo build --profile dist --locked --bin mcp-gateway "$@" >&2
else
  echo "==> building mcp-gateway (dist profile, without an optimisation profile)" >&2
  CARGO_TARGET_DIR="$target" cargo build --profile dist --locked --bin mcp-gateway "$@" >&2
fi
echo "$target/dist/mcp-gateway"
