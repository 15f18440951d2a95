"""Keeps the documents embedded in deploy/service.yaml identical to their source files.

The CloudFormation template carries two documents as block scalars -- the collector
configuration (SSM parameter value) and the alert rules (AMP rule groups namespace) --
because a plain template cannot read files. The tested files are the source of truth:
`check` fails when a copy differs, `fix` rewrites the copies. Standard library only.

usage: python3 scripts/deploy_sync.py check|fix [TEMPLATE]
"""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# (resource logical id, property holding the block scalar, source file)
EMBEDDED = [
    ("AlertRules", "Data", "deploy/alert-rules.yaml"),
    ("CollectorConfig", "Value", "deploy/otel-collector.yaml"),
]


def block(lines, resource, prop):
    """(first, end, indent) of the block scalar `prop: |` inside `resource:`."""
    start = next((i for i, l in enumerate(lines) if l == f"  {resource}:"), None)
    if start is None:
        raise SystemExit(f"deploy_sync: resource {resource} not found")
    head = next(
        (i for i in range(start + 1, len(lines)) if lines[i].strip() == f"{prop}: |"), None
    )
    if head is None or any(lines[i].startswith("  ") and not lines[i].startswith("   ") for i in range(start + 1, head)):
        raise SystemExit(f"deploy_sync: {resource}.{prop} is not a `|` block scalar")
    indent = len(lines[head]) - len(lines[head].lstrip()) + 2
    end = head + 1
    while end < len(lines) and (lines[end].strip() == "" or lines[end].startswith(" " * indent)):
        end += 1
    while end > head + 1 and lines[end - 1].strip() == "":
        end -= 1
    return head + 1, end, indent


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "check"
    template = Path(sys.argv[2]) if len(sys.argv) > 2 else ROOT / "deploy/service.yaml"
    lines = template.read_text().split("\n")
    stale = []
    for resource, prop, source in EMBEDDED:
        first, end, indent = block(lines, resource, prop)
        embedded = "\n".join(l[indent:] for l in lines[first:end]) + "\n"
        text = (ROOT / source).read_text()
        if embedded != text:
            stale.append(f"{resource}.{prop} differs from {source}")
            lines[first:end] = [(" " * indent + l) if l else "" for l in text.rstrip("\n").split("\n")]
    if mode == "fix":
        template.write_text("\n".join(lines))
        for s in stale:
            print(f"deploy_sync: rewrote {s.split(' differs')[0]} from {s.split('from ')[1]}")
    elif stale:
        for s in stale:
            print(f"deploy_sync: {template.name}: {s} (run: bash scripts/validate-deploy.sh --sync)")
        sys.exit(1)
    # SSM Standard parameters hold at most 4 KB.
    config = (ROOT / "deploy/otel-collector.yaml").read_text()
    if len(config.encode()) > 4096:
        print("deploy_sync: deploy/otel-collector.yaml is over 4 KB: use Tier: Advanced for CollectorConfig")
        sys.exit(1)


if __name__ == "__main__":
    main()
