#!/usr/bin/env bash
# The README's test command: installs what the tests need on a fresh machine, then checks
# formatting and lints, and runs every test (unit and integration, real peers on loopback).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-test-deps.sh

echo "==> cargo fmt --check"
cargo fmt --all -- --check
echo "==> cargo clippy -D warnings"
cargo clippy --locked --all-targets -- -D warnings
bash scripts/validate-deploy.sh
echo "==> the benchmark scripts parse (they need a quiet machine, so the test command runs none)"
for script in bench/*.sh; do bash -n "$script"; done
echo "==> the optimisation profile the shipped build uses"
bash scripts/check-pgo-profile.sh
echo "==> cargo test"
cargo test --locked --lib --bins --tests --examples -- --test-threads "${TEST_THREADS:-2}"
# The benches once each, as tests (criterion's test mode; its CLI refuses libtest's flags).
echo "==> cargo test --benches"
cargo test --locked --benches
