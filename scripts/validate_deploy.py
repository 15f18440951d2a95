"""Checks of the deployment artifacts that no off-the-shelf linter makes.

    validate_deploy.py taskdef TASKDEF.json [TEMPLATE.yaml]
        The task definition against the ECS API's own input shape (botocore's service model
        for RegisterTaskDefinition, the same validation the AWS CLI runs before sending), then
        the rules this project relies on (below). With TEMPLATE, the template's
        AWS::ECS::TaskDefinition is converted to the API form, checked the same way, and
        compared with the JSON (equal wherever the template has a literal).
    validate_deploy.py compose COMPOSE.yaml
        What the compose specification's JSON schema cannot say: depends_on targets exist,
        `service_healthy` targets have a healthcheck, health checks use exec form, published
        ports bind the host's loopback.
    validate_deploy.py otel COLLECTOR.yaml
        Every component the collector's pipelines name is configured; the scrape job is the
        one the alert rules select.
    validate_deploy.py iam POLICY.json TEMPLATE.yaml
        deploy/iam-policy.json grants what the template's task role grants (same statements,
        same actions), and Lambda is granted on qualified ARNs only.

Runs in the validation venv (.tools/venv: botocore, PyYAML, cfn-lint's template decoder).
Exit 1 with one line per problem.
"""

import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
PROBLEMS = []


def problem(where, text):
    PROBLEMS.append(f"{where}: {text}")


def cfn_template(path):
    from cfnlint.decode import decode

    template, matches = decode(str(path))
    if matches:
        raise SystemExit(f"{path}: cannot parse: {matches}")
    return template


# --- task definition -----------------------------------------------------------------------------

PLACEHOLDER = "cfn-intrinsic"
# CloudFormation maps whose keys are data, not property names.
KEEP_KEYS = {"Options", "DockerLabels", "SystemControls"}


def cfn_to_api(value, keep=False):
    """AWS::ECS::TaskDefinition properties -> RegisterTaskDefinition input (camelCase keys,
    intrinsic functions replaced by a placeholder string, Fn::If taking its true branch)."""
    if isinstance(value, dict):
        if len(value) == 1:
            (key, inner), = value.items()
            if key == "Fn::If":
                branch = inner[1] if inner[1] != {"Ref": "AWS::NoValue"} else inner[2]
                return cfn_to_api(branch, keep)
            if key == "Ref" and inner == "AWS::NoValue":
                return None
            if key == "Ref" or key.startswith("Fn::"):
                return PLACEHOLDER
        out = {}
        for key, inner in value.items():
            converted = cfn_to_api(inner, keep=key in KEEP_KEYS)
            if converted is not None:
                out[key if keep else key[:1].lower() + key[1:]] = converted
        return out
    if isinstance(value, list):
        return [c for c in (cfn_to_api(v) for v in value) if c is not None]
    return value


def scrape_port():
    """The port the collector scrapes (deploy/otel-collector.yaml)."""
    config = yaml.safe_load((ROOT / "deploy/otel-collector.yaml").read_text())
    target = config["receivers"]["prometheus"]["config"]["scrape_configs"][0]["static_configs"][0]["targets"][0]
    return target.rsplit(":", 1)[1]


def check_taskdef(doc, where):
    import botocore.session
    from botocore.validate import ParamValidator

    shape = botocore.session.get_session().get_service_model("ecs").operation_model(
        "RegisterTaskDefinition"
    ).input_shape
    report = ParamValidator().validate(doc, shape)
    if report.has_errors():
        for line in report.generate_report().splitlines():
            problem(where, f"ECS RegisterTaskDefinition shape: {line}")
        return
    containers = {c["name"]: c for c in doc["containerDefinitions"]}
    if len(containers) != len(doc["containerDefinitions"]):
        problem(where, "container names are not unique")
    reserved = 0
    for name, c in containers.items():
        reserved += c.get("memoryReservation", c.get("memory", 0))
        for dep in c.get("dependsOn", []):
            target = containers.get(dep["containerName"])
            if target is None:
                problem(where, f"{name} depends on a missing container {dep['containerName']}")
            elif dep["condition"] == "HEALTHY" and "healthCheck" not in target:
                problem(where, f"{name} waits for {dep['containerName']} HEALTHY, which has no healthCheck")
        check = c.get("healthCheck", {}).get("command")
        if check and check[0] != "CMD":
            problem(where, f"{name}: health check {check[0]} needs a shell; the images have none (use CMD, exec form)")
        if c.get("essential", True):
            if "memory" in c:
                problem(where, f"{name}: a hard `memory` limit on an essential container stops the task when it is hit; use memoryReservation")
            if "memoryReservation" not in c:
                problem(where, f"{name}: essential container without memoryReservation")
        logs = c.get("logConfiguration", {})
        if logs.get("logDriver") != "awslogs" or not logs.get("options", {}).get("awslogs-group"):
            problem(where, f"{name}: logs must go to an awslogs group")
    task_memory = doc.get("memory")
    if task_memory and task_memory != PLACEHOLDER and reserved > int(task_memory):
        problem(where, f"memory reservations ({reserved} MiB) exceed the task's {task_memory} MiB")

    gateway = containers.get("mcp-gateway")
    if gateway is None:
        problem(where, "no mcp-gateway container")
        return
    env = {e["name"]: e["value"] for e in gateway.get("environment", [])}
    grace = int(env.get("MCP_GATEWAY_SHUTDOWN_GRACE_SECS", "30"))  # src/config.rs default
    stop = gateway.get("stopTimeout", 30)
    if not grace < stop <= 120:
        problem(where, f"mcp-gateway stopTimeout {stop} must be above shutdown_grace_secs {grace} (and at most 120 on Fargate)")
    if not gateway.get("readonlyRootFilesystem"):
        problem(where, "mcp-gateway needs readonlyRootFilesystem")
    user = gateway.get("user", "")
    if not re.fullmatch(r"[1-9][0-9]*(:[1-9][0-9]*)?", user):
        problem(where, f"mcp-gateway user {user!r} must be a numeric non-root uid[:gid]")
    check = gateway.get("healthCheck", {}).get("command", [])
    if "healthcheck" not in check:
        problem(where, "mcp-gateway health check must run the `mcp-gateway healthcheck` subcommand")
    metrics = env.get("MCP_GATEWAY_METRICS_LISTEN", "")
    if metrics.rsplit(":", 1)[-1] != scrape_port():
        problem(where, f"MCP_GATEWAY_METRICS_LISTEN {metrics!r} is not the port the collector scrapes ({scrape_port()})")
    for dependant in (c for n, c in containers.items() if n != "mcp-gateway" and "MCP_GATEWAY_URL" in str(c)):
        if {"containerName": "mcp-gateway", "condition": "HEALTHY"} not in dependant.get("dependsOn", []):
            problem(where, f"{dependant['name']} calls the gateway but does not wait for it HEALTHY")


def same_task(json_doc, cfn_doc, where, path="task"):
    """The template's task definition says what the JSON says, except where it has an
    intrinsic (an ARN, an image, a parameter): the two files cannot drift apart."""
    if cfn_doc == PLACEHOLDER:
        return
    if isinstance(cfn_doc, dict) and isinstance(json_doc, dict):
        for key in sorted(set(cfn_doc) | set(json_doc)):
            if key not in cfn_doc or key not in json_doc:
                problem(where, f"{path}.{key} is in only one of the JSON and the template")
            else:
                same_task(json_doc[key], cfn_doc[key], where, f"{path}.{key}")
    elif isinstance(cfn_doc, list) and isinstance(json_doc, list):
        def key(item):
            return item.get("name", item.get("containerName")) if isinstance(item, dict) else None

        if all(key(i) for i in cfn_doc + json_doc):
            same_task({key(i): i for i in json_doc}, {key(i): i for i in cfn_doc}, where, path)
        elif len(cfn_doc) != len(json_doc):
            problem(where, f"{path} has {len(json_doc)} items in the JSON, {len(cfn_doc)} in the template")
        else:
            for i, (a, b) in enumerate(zip(json_doc, cfn_doc)):
                same_task(a, b, where, f"{path}[{i}]")
    elif json_doc != cfn_doc:
        problem(where, f"{path}: {json_doc!r} in the JSON, {cfn_doc!r} in the template")


def taskdef(path, template=None):
    json_doc = json.loads(Path(path).read_text())
    check_taskdef(json_doc, path)
    if template:
        resources = cfn_template(template)["Resources"]
        for logical, resource in resources.items():
            if resource["Type"] == "AWS::ECS::TaskDefinition":
                cfn_doc = cfn_to_api(resource["Properties"])
                check_taskdef(cfn_doc, f"{template}:{logical}")
                same_task(json_doc, cfn_doc, f"{template}:{logical} vs {path}")


# --- compose -----------------------------------------------------------------------------------

def compose(path):
    doc = yaml.safe_load(Path(path).read_text())
    services = doc.get("services", {})
    for name, service in services.items():
        depends = service.get("depends_on", {})
        if isinstance(depends, list):
            depends = {d: {"condition": "service_started"} for d in depends}
        for target, spec in depends.items():
            if target not in services:
                problem(path, f"{name} depends on a missing service {target}")
                continue
            condition = spec.get("condition")
            if condition == "service_healthy" and "healthcheck" not in services[target]:
                problem(path, f"{name} waits for {target} healthy, which has no healthcheck")
            if condition == "service_completed_successfully" and services[target].get("restart", "no") != "no":
                problem(path, f"{name} waits for {target} to complete, but it restarts")
        test = service.get("healthcheck", {}).get("test")
        if isinstance(test, str) or (test and test[0] not in ("CMD", "NONE")):
            problem(path, f"{name}: healthcheck must use exec form ([CMD, ...]); the gateway image has no shell")
        for port in service.get("ports", []):
            if not str(port).startswith("127.0.0.1:"):
                problem(path, f"{name}: published port {port} must bind the host's 127.0.0.1")


# --- collector ---------------------------------------------------------------------------------

def otel(path):
    """What the collector checks at start (no collector binary here): every component a
    pipeline or the service names is configured, and the scrape target is the gateway's."""
    doc = yaml.safe_load(Path(path).read_text())
    service = doc.get("service", {})
    for name in service.get("extensions", []):
        if name not in (doc.get("extensions") or {}):
            problem(path, f"service extension {name} is not configured")
    for pipeline, spec in service.get("pipelines", {}).items():
        for kind in ("receivers", "processors", "exporters"):
            for name in spec.get(kind, []):
                if name not in (doc.get(kind) or {}):
                    problem(path, f"pipeline {pipeline}: {kind[:-1]} {name} is not configured")
    jobs = doc["receivers"]["prometheus"]["config"]["scrape_configs"]
    if not any(j.get("job_name") == "mcp-gateway" for j in jobs):
        problem(path, "no scrape job named mcp-gateway (the alert rules select up{job=\"mcp-gateway\"})")


# --- IAM ---------------------------------------------------------------------------------------

def iam(policy_path, template_path):
    policy = json.loads(Path(policy_path).read_text())
    resources = cfn_template(template_path)["Resources"]

    def actions(statement):
        a = statement["Action"]
        return sorted([a] if isinstance(a, str) else a)

    standalone = {s["Sid"]: actions(s) for s in policy["Statement"]}
    role = {}
    for p in resources["TaskRole"]["Properties"]["Policies"]:
        for s in p["PolicyDocument"]["Statement"]:
            role[s["Sid"]] = actions(s)
    if standalone != role:
        problem(policy_path, f"differs from the template's TaskRole: {standalone} != {role}")
    for s in policy["Statement"]:
        if "lambda:InvokeFunction" in actions(s) or any(a.startswith("lambda:*") for a in actions(s)):
            arns = [s["Resource"]] if isinstance(s["Resource"], str) else s["Resource"]
            for arn in arns:
                parts = arn.split(":")
                if len(parts) != 8 or "*" in arn or parts[7] in ("", "$LATEST"):
                    problem(policy_path, f"{arn}: Lambda must be granted on qualified ARNs only (function:NAME:ALIAS)")


def main():
    command, *args = sys.argv[1:]
    {"taskdef": taskdef, "compose": compose, "iam": iam, "otel": otel}[command](*args)
    for line in PROBLEMS:
        print(line)
    sys.exit(1 if PROBLEMS else 0)


if __name__ == "__main__":
    main()
