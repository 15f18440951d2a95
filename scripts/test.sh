#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine, then checks
# formatting and lints (clippy, during the build), and runs every test (unit and integration,
# real peers on loopback).
#
# The installers (apt, npm, pip) and the deployment validators wait on the network and on
# Python; the Rust build needs both cores. So they run beside the build, their output kept
# and printed once the build is done, and the tests start only when both have finished.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it starts (minutes:seconds since the command began).
step() { printf '==> [%d:%02d] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

setup_log=$(mktemp)
step "installing the test peers and validating the deployment files, beside the build"
(bash scripts/install-test-deps.sh && bash scripts/validate-deploy.sh) > "$setup_log" 2>&1 &
setup=$!
trap 'kill "$setup" 2> /dev/null || true; rm -f "$setup_log"' EXIT

step "cargo fmt --check"
cargo fmt --all -- --check
# Clippy rides on the test build (scripts/clippy-rustc.sh compiles this crate's targets with
# its lints, every warning an error), so the dependencies are compiled once. Every cargo call
# below keeps the setting, or cargo would rebuild this crate without it.
export RUSTC_WORKSPACE_WRAPPER="$PWD/scripts/clippy-rustc.sh"
step "building every test (lib, bins, the suite, examples, benches) with clippy -D warnings"
cargo test --locked --lib --bins --tests --examples --benches --no-run

step "waiting for the peers' installation and the deployment validation"
if wait "$setup"; then
  cat "$setup_log"
else
  status=$?
  cat "$setup_log"
  echo "test.sh: installing the test peers or validating the deployment files failed (exit $status)" >&2
  exit "$status"
fi

step "the benchmark scripts parse (they need a quiet machine, so the test command runs none)"
for script in bench/*.sh; do bash -n "$script"; done
step "the optimisation profile the shipped build uses"
bash scripts/check-pgo-profile.sh
# Four tests at a time on two cores: most of a test is waiting for a peer to start or a
# deadline to pass, so two at a time left a core idle; the tests assert what happened, never
# how long it took, so a loaded machine slows them without failing them.
step "cargo test"
cargo test --locked --lib --bins --tests --examples -- --test-threads "${TEST_THREADS:-4}"
# The benches once each, as tests (criterion's test mode; its CLI refuses libtest's flags).
step "cargo test --benches"
cargo test --locked --benches
step "all passed"
