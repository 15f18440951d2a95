#!/usr/bin/env bash
# The compiler of this crate's own targets in the test command (cargo's
# RUSTC_WORKSPACE_WRAPPER): clippy's driver, which is rustc plus clippy's lints, with every
# warning an error — `cargo clippy --all-targets -- -D warnings` riding on the test build.
# Dependencies are compiled by plain rustc, once, instead of checked for clippy and then
# compiled again for the tests. Cargo calls this as `clippy-rustc.sh <path to rustc> <args>`.
exec clippy-driver "$@" -D warnings
