#!/usr/bin/env bash
# The committed optimisation profile (pgo/mcp-gateway.profdata, bench/README.md "Profile-guided
# optimisation") must be readable by this toolchain's rustc, which builds the image with it.
# rustc only warns about an unreadable profile (the image would quietly be built without it)
# and crashes on a truncated one, so: compile a one-line program with the profile, and fail
# on any output or failure. Then prove the check can fail: a profile with a bad header and a
# truncated one must both be refused. Run by scripts/test.sh; takes about a second.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
profile=pgo/mcp-gateway.profdata
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo 'fn main() { println!("profiled"); }' > "$tmp/main.rs"

readable() {
  local out
  out=$(rustc -O -Cprofile-use="$1" -Cllvm-args=-no-pgo-warn-mismatch "$tmp/main.rs" -o "$tmp/main" 2>&1) \
    && [ -z "$out" ]
}

[ -f "$profile" ] || { echo "check-pgo-profile: $profile is missing (bash bench/pgo.sh records it)" >&2; exit 1; }
readable "$PWD/$profile" || {
  echo "check-pgo-profile: rustc $(rustc --version) cannot use $profile; re-record it: bash bench/pgo.sh" >&2
  exit 1
}
echo "==> ok: $profile is readable by $(rustc --version)"

echo "not a profile" > "$tmp/bad-magic.profdata"
head -c 4096 "$profile" > "$tmp/truncated.profdata"
for broken in bad-magic truncated; do
  if readable "$tmp/$broken.profdata" 2> /dev/null; then
    echo "check-pgo-profile: a $broken profile was not refused: the check cannot fail" >&2
    exit 1
  fi
  echo "    refused ($broken profile)"
done
