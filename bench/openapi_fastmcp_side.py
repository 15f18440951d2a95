"""FastMCP's side of bench/openapi-compare.py: one OpenAPI document through
`FastMCP.from_openapi` (FastMCP as pinned in tests/peers/requirements-lambda.txt), in a process
of its own so its time and peak memory are the document's alone.

Usage: tests/peers/.venv-lambda/bin/python bench/openapi_fastmcp_side.py DOCUMENT OUT.json

Writes, per operation of the document (method and path), the tool FastMCP made of it (or none),
the document's parameters the tool's input schema lacks, whether a request body the document
declares is in the schema, and every warning or error FastMCP logged while mapping; plus the
seconds from the parsed document to the listed tools and the process's peak RSS. Nothing is
called: the HTTP client points at a closed port.
"""

import asyncio
import json
import logging
import resource
import sys
import time

import httpx
from fastmcp import FastMCP

METHODS = ("get", "put", "post", "delete", "patch", "head", "options", "trace")


class Collect(logging.Handler):
    """Every record FastMCP logs at WARNING or above while it maps the document."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append({"level": record.levelname, "message": record.getMessage()[:300]})


def operations(doc):
    for path, item in (doc.get("paths") or {}).items():
        if not isinstance(item, dict):
            continue
        shared = item.get("parameters") or []
        for method in METHODS:
            op = item.get(method)
            if isinstance(op, dict):
                yield method.upper(), path, op, shared


def resolve(doc, node):
    """A local `$ref` followed (parameters and request bodies are often references)."""
    seen = 0
    while isinstance(node, dict) and "$ref" in node and seen < 20:
        ref = node["$ref"]
        if not ref.startswith("#/"):
            return node
        node = doc
        for part in ref[2:].split("/"):
            node = node.get(part.replace("~1", "/").replace("~0", "~"), {}) if isinstance(node, dict) else {}
        seen += 1
    return node


async def main(path, out):
    doc = json.load(open(path))
    collect = Collect()
    logging.getLogger().addHandler(collect)
    logging.getLogger("fastmcp").addHandler(collect)
    started = time.monotonic()
    server = FastMCP.from_openapi(openapi_spec=doc, client=httpx.AsyncClient(base_url="http://127.0.0.1:9"), name="compare")
    tools = await server.list_tools()
    seconds = time.monotonic() - started
    by_route = {}
    for tool in tools:
        route = getattr(tool, "_route", None)
        if route is not None:
            by_route[(str(route.method).upper(), route.path)] = tool
    rows = []
    for method, p, op, shared in operations(doc):
        tool = by_route.get((method, p))
        params = {}
        for raw in list(shared) + list(op.get("parameters") or []):
            param = resolve(doc, raw)
            if isinstance(param, dict) and "name" in param:
                params[(param["name"], param.get("in"))] = param
        body = resolve(doc, op.get("requestBody")) if op.get("requestBody") else None
        row = {"method": method, "path": p, "operationId": op.get("operationId"), "tool": tool.name if tool else None}
        if tool is not None:
            props = set(((tool.parameters or {}).get("properties") or {}).keys())
            # FastMCP suffixes a name a parameter and the body share (`id__path`), so a
            # parameter counts as present under its own name or a suffixed one.
            row["missing_parameters"] = sorted(
                f"{name} ({where})" for (name, where) in params if name not in props and not any(q.startswith(name + "__") for q in props)
            )
            media = sorted((body or {}).get("content", {}).keys()) if isinstance(body, dict) else []
            row["body_media"] = media
            # The body's properties sit beside the parameters in the one input schema.
            row["body_in_schema"] = None if not media else bool(props - {n for (n, _) in params})
        rows.append(row)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    json.dump(
        {
            "document": path,
            "operations": len(rows),
            "tools": len(tools),
            "seconds": round(seconds, 2),
            "peak_rss_kib": usage.ru_maxrss,
            "log": collect.records,
            "rows": rows,
        },
        open(out, "w"),
        ensure_ascii=False,
    )


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    asyncio.run(main(sys.argv[1], sys.argv[2]))
