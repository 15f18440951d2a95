#!/usr/bin/env bash
# Validates the deployment artifacts with the real tools (run by scripts/test.sh):
#   * cfn-lint on deploy/service.yaml, and the documents it embeds identical to their files;
#   * promtool check rules + promtool test rules on deploy/alert-rules.yaml (and the test
#     file is what deploy/alert-rules.test.py generates);
#   * hadolint on the Dockerfile;
#   * the task definitions (deploy/ecs-task-definition.json and the template's) against the
#     ECS RegisterTaskDefinition input shape from botocore's service model, plus this
#     project's rules (scripts/validate_deploy.py);
#   * docker/compose.yaml against the compose specification's JSON schema;
#   * deploy/otel-collector.yaml's pipelines against its components;
#   * deploy/iam-policy.json against the template's task role.
# Then it proves each validator can fail: a deliberately broken copy of each artifact must
# be refused.
#
# Tools are installed idempotently under .tools/ (gitignored): a venv from PyPI with the pins
# of scripts/validate-deploy.requirements.txt, and promtool and the Prometheus server extracted
# from Debian's `prometheus` package (apt-get download, no service installed; the server is the
# real Prometheus that tests/suite/grafana_dashboard.rs runs every dashboard query against). A
# warm run installs nothing.
#
# usage: bash scripts/validate-deploy.sh          validate
#        bash scripts/validate-deploy.sh --sync   first copy deploy/alert-rules.yaml and
#                                                 deploy/otel-collector.yaml into the template
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

started=$(date +%s)
tools=.tools
venv=$tools/venv
requirements=scripts/validate-deploy.requirements.txt
py=$venv/bin/python
promtool=$tools/bin/promtool
prometheus=$tools/bin/prometheus

step() { printf '==> %s\n' "$*"; }
die() { printf 'validate-deploy: %s\n' "$*" >&2; exit 1; }

# --- tools ---------------------------------------------------------------------------------
if [ -x "$py" ] && cmp -s "$requirements" "$venv/.installed-requirements"; then
  step "validation tools present ($venv)"
else
  step "installing validation tools into $venv (pip install -r $requirements)"
  rm -f "$venv/.installed-requirements"
  [ -x "$py" ] || python3 -m venv "$venv"
  "$py" -m pip install --quiet --disable-pip-version-check -r "$requirements"
  cp "$requirements" "$venv/.installed-requirements"
fi

if [ -x "$promtool" ] && "$promtool" --version >/dev/null 2>&1 \
  && [ -x "$prometheus" ] && "$prometheus" --version >/dev/null 2>&1; then
  step "promtool and prometheus present ($tools/bin)"
else
  step "installing promtool and prometheus from Debian's prometheus package into $tools/bin"
  command -v apt-get >/dev/null 2>&1 || die "promtool is missing and apt-get is not available"
  deb=$(mktemp -d)
  if ! (cd "$deb" && apt-get download -qq prometheus >/dev/null 2>&1); then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    (cd "$deb" && apt-get download -qq prometheus) || die "apt-get download prometheus failed"
  fi
  mkdir -p "$tools/bin"
  dpkg-deb --fsys-tarfile "$deb"/prometheus_*.deb | tar -x -C "$deb" ./usr/bin/promtool ./usr/bin/prometheus
  mv "$deb/usr/bin/promtool" "$promtool"
  mv "$deb/usr/bin/prometheus" "$prometheus"
  rm -rf "$deb"
  "$promtool" --version >/dev/null || die "the extracted promtool does not run"
  "$prometheus" --version >/dev/null || die "the extracted prometheus does not run"
fi

versions=$(printf '%s; %s; hadolint %s; check-jsonschema %s; botocore %s' \
  "$("$venv/bin/cfn-lint" --version)" \
  "$("$promtool" --version 2>&1 | sed -n '1s/, version \([^ ]*\).*/ \1/p')" \
  "$("$venv/bin/hadolint" --version | awk '{print $NF}')" \
  "$("$venv/bin/check-jsonschema" --version | awk '{print $NF}')" \
  "$("$py" -c 'import botocore; print(botocore.__version__)')")
step "tools: $versions"

if [ "${1:-}" = "--sync" ]; then
  "$py" scripts/deploy_sync.py fix
fi

# --- the validators ------------------------------------------------------------------------
# Each takes the files to check, so the same function validates the real artifacts and the
# broken copies below.
v_cfn_lint()   { "$venv/bin/cfn-lint" --include-checks I -- "$1"; }  # informational findings too
v_embedded()   { "$py" scripts/deploy_sync.py check "$1"; }
v_rules()      { "$promtool" check rules "$1"; }
v_rule_tests() { "$promtool" test rules "$1"; }
v_rule_gen()   { "$py" deploy/alert-rules.test.py | cmp -s - "$1" || { echo "$1 is not the output of deploy/alert-rules.test.py"; return 1; }; }
v_hadolint()   { "$venv/bin/hadolint" "$1"; }
v_taskdef()    { "$py" scripts/validate_deploy.py taskdef "$@"; }
v_compose()    { "$venv/bin/check-jsonschema" --builtin-schema vendor.compose-spec "$1" && "$py" scripts/validate_deploy.py compose "$1"; }
v_otel()       { "$py" scripts/validate_deploy.py otel "$1"; }
v_iam()        { "$py" scripts/validate_deploy.py iam "$1" "$2"; }

failed=0
check() {
  local what=$1; shift
  local out
  if out=$("$@" 2>&1); then
    step "ok: $what"
  else
    printf '%s\n' "$out" | sed 's/^/    /'
    step "FAILED: $what"
    failed=1
  fi
}

check "cfn-lint deploy/service.yaml (errors, warnings and informational)" v_cfn_lint deploy/service.yaml
check "template embeds deploy/alert-rules.yaml and deploy/otel-collector.yaml" v_embedded deploy/service.yaml
check "promtool check rules deploy/alert-rules.yaml" v_rules deploy/alert-rules.yaml
check "promtool test rules deploy/alert-rules.test.yaml" v_rule_tests deploy/alert-rules.test.yaml
check "deploy/alert-rules.test.yaml is generated by deploy/alert-rules.test.py" v_rule_gen deploy/alert-rules.test.yaml
check "hadolint Dockerfile" v_hadolint Dockerfile
check "task definitions against ECS RegisterTaskDefinition (botocore) and project rules" \
  v_taskdef deploy/ecs-task-definition.json deploy/service.yaml
check "docker/compose.yaml against the compose specification" v_compose docker/compose.yaml
check "deploy/otel-collector.yaml pipelines name configured components" v_otel deploy/otel-collector.yaml
check "deploy/iam-policy.json matches the template's task role" v_iam deploy/iam-policy.json deploy/service.yaml
[ "$failed" -eq 0 ] || die "deployment artifacts are invalid (see above)"

# --- each validator refuses a broken copy --------------------------------------------------
broken=$(mktemp -d)
trap 'rm -rf "$broken"' EXIT
must_fail() {
  local what=$1; shift
  if "$@" >"$broken/out" 2>&1; then
    die "validator accepted a broken copy: $what"
  fi
  # The refusal's first meaningful line, so the log shows it failed for the intended reason.
  printf '    refused (%s): %s\n' "$what" \
    "$(grep -v -e '^\s*$' -e '^Unit Testing' -e '^Checking' -e '^  FAILED:$' -e '^Schema validation errors' "$broken/out" | head -n 1 | cut -c1-150)"
}
mutate() { # mutate SOURCE DEST SED-EXPRESSION: a copy that must differ from its source
  sed "$3" "$1" >"$2"
  ! cmp -s "$1" "$2" || die "mutation of $1 changed nothing: $3"
}

mutate deploy/service.yaml "$broken/service.yaml" 's/ReadonlyRootFilesystem: true/ReadOnlyRootFilesystem: true/'
must_fail "cfn-lint: a misspelt property" v_cfn_lint "$broken/service.yaml"
mutate deploy/service.yaml "$broken/service.yaml" 's/> 0.05$/> 0.5/'
must_fail "embedded rules edited in the template only" v_embedded "$broken/service.yaml"
mutate deploy/alert-rules.yaml "$broken/bad-syntax.yaml" '0,/rate(mcp_gateway_tool_calls_total/s//rate(mcp_gateway_tool_calls_total(/'
must_fail "promtool check rules: a PromQL syntax error" v_rules "$broken/bad-syntax.yaml"
# The outage the issue describes: circuit_open left out of the error ratio.
mkdir -p "$broken/rules"
mutate deploy/alert-rules.yaml "$broken/rules/alert-rules.yaml" 's/outcome!~"success|tool_error|/outcome!~"circuit_open|success|tool_error|/'
cp deploy/alert-rules.test.yaml "$broken/rules/"
must_fail "promtool test rules: circuit_open not counted as an error" v_rule_tests "$broken/rules/alert-rules.test.yaml"
mutate deploy/alert-rules.test.yaml "$broken/alert-rules.test.yaml" '0,/eval_time: 25m/s//eval_time: 26m/'
must_fail "a hand-edited rule test file" v_rule_gen "$broken/alert-rules.test.yaml"
mutate Dockerfile "$broken/Dockerfile" 's/^USER 65532:65532$/USER root/'
must_fail "hadolint: the image runs as root" v_hadolint "$broken/Dockerfile"
mutate deploy/ecs-task-definition.json "$broken/taskdef-shape.json" 's/"memoryReservation": 128,/"memoryReservation": "128",/'
must_fail "task definition: a string where the ECS API wants an integer" v_taskdef "$broken/taskdef-shape.json"
mutate deploy/ecs-task-definition.json "$broken/taskdef-shell.json" 's/\["CMD", "\/usr\/local\/bin\/mcp-gateway", "healthcheck"\]/["CMD-SHELL", "curl -f http:\/\/127.0.0.1:8080\/healthz"]/'
must_fail "task definition: a shell health check in a shell-less image" v_taskdef "$broken/taskdef-shell.json"
mutate deploy/service.yaml "$broken/service-taskdef.yaml" 's/StopTimeout: 45/StopTimeout: 20/'
must_fail "template task definition: stopTimeout under the drain time" v_taskdef deploy/ecs-task-definition.json "$broken/service-taskdef.yaml"
mutate deploy/ecs-task-definition.json "$broken/taskdef-drift.json" 's/"stopTimeout": 45/"stopTimeout": 60/'
must_fail "task definition JSON drifted from the template's" v_taskdef "$broken/taskdef-drift.json" deploy/service.yaml
mutate docker/compose.yaml "$broken/compose.yaml" 's/condition: service_completed_successfully/condition: service_finished/'
must_fail "compose: a depends_on condition the specification does not have" v_compose "$broken/compose.yaml"
mutate deploy/otel-collector.yaml "$broken/otel-collector.yaml" 's/processors: \[memory_limiter, resourcedetection, batch\]/processors: [memory_limiter, resource_detection, batch]/'
must_fail "collector: a pipeline naming an unconfigured processor" v_otel "$broken/otel-collector.yaml"
mutate deploy/iam-policy.json "$broken/iam-policy.json" 's/function:mangaassist-checkout-mcp:live/function:mangaassist-checkout-mcp/'
must_fail "IAM: an unqualified Lambda ARN" v_iam "$broken/iam-policy.json" deploy/service.yaml
step "ok: every validator refuses a broken copy (13 cases)"

step "deployment artifacts valid ($(( $(date +%s) - started )) s)"
