#!/usr/bin/env bash
# Installs what the integration tests need on a fresh machine of this project's kind
# (Debian, Rust, Node 20, Python 3.11): redis-server (apt), the official TypeScript
# "everything" MCP server (npm, pinned in tests/peers/package-lock.json), and the Python MCP
# SDK 2.x (pip, pinned in tests/peers/requirements.txt, in tests/peers/.venv).
# Idempotent: each step is skipped when its result is already there.
set -euo pipefail
cd "$(dirname "$0")/.."
peers=tests/peers

step() { printf '==> %s\n' "$*"; }

if ! command -v redis-server >/dev/null 2>&1; then
  step "installing redis-server (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
else
  step "redis-server present: $(redis-server --version | cut -d' ' -f3)"
fi

for tool in node npm python3; do
  command -v "$tool" >/dev/null 2>&1 || { echo "missing $tool: install Node.js 20 and Python 3.11" >&2; exit 1; }
done

stamp="$peers/node_modules/.installed-lock"
if [ ! -f "$stamp" ] || ! cmp -s "$peers/package-lock.json" "$stamp"; then
  step "installing Node test peers (npm ci in $peers)"
  (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error)
  cp "$peers/package-lock.json" "$stamp"
else
  step "Node test peers present"
fi

pystamp="$peers/.venv/.installed-requirements"
if [ ! -x "$peers/.venv/bin/python" ] || ! cmp -s "$peers/requirements.txt" "$pystamp"; then
  step "installing the Python MCP SDK into $peers/.venv"
  python3 -m venv "$peers/.venv"
  "$peers/.venv/bin/pip" install --quiet --disable-pip-version-check -r "$peers/requirements.txt"
  cp "$peers/requirements.txt" "$pystamp"
else
  step "Python MCP SDK present"
fi
step "test dependencies ready"
