"""FastMCP's client with the Skills extension (SEP-2640): lists, gets and reads skills through
whatever MCP endpoint it is given, and prints one JSON object of what it saw. Run from
tests/peers/.venv-skills.

Usage: skills_client.py URL [--no-extension] ACTION...
  list          every page of skills/list (`skills`, `pages`: the pages it took)
  get:URI       skills/get of a SKILL.md URI (`entry` or `error`)
  read:URI      resources/read of a skill's file (`text` or `error`)
  verify:URI    read_skill: every file read and checked against its manifest digest and size
                (the manifest from skills/get, or without the extension its `_manifest` resource)
  resources     list_skill_resources: the skills served as `skill://…/SKILL.md` resources
Always: `version` (the protocol revision negotiated) and `extensions` (the server's
`capabilities.extensions`); with --no-extension the client does not declare the extension.
"""

import asyncio
import json
import sys

from fastmcp import Client
from fastmcp.skills.client import SkillsClientExtension


def failure(exc: BaseException) -> dict:
    code = getattr(getattr(exc, "error", None), "code", None)
    if code is None:
        code = getattr(exc, "code", None)
    return {"type": type(exc).__name__, "code": code, "message": str(exc)}


async def main() -> None:
    url, args = sys.argv[1], sys.argv[2:]
    declare = "--no-extension" not in args
    actions = [a for a in args if a != "--no-extension"]
    client = Client(url, extensions=[SkillsClientExtension()] if declare else [])
    out: dict = {"actions": {}}
    async with client:
        caps = client.server_capabilities
        out["version"] = client.protocol_version
        out["extensions"] = (caps.extensions if caps else None) or {}
        for action in actions:
            kind, _, uri = action.partition(":")
            try:
                if kind == "list":
                    skills, pages, cursor = [], 0, None
                    while True:
                        page = await client.list_skills_mcp(cursor=cursor, cache_mode="bypass")
                        pages += 1
                        skills += [s.model_dump(mode="json", by_alias=True, exclude_none=True) for s in page.skills]
                        cursor = page.next_cursor
                        if cursor is None:
                            break
                    result = {"skills": skills, "pages": pages}
                elif kind == "get":
                    entry = await client.get_skill(uri, cache_mode="bypass")
                    result = {"entry": entry.model_dump(mode="json", by_alias=True, exclude_none=True)}
                elif kind == "read":
                    contents = await client.read_resource(uri)
                    result = {"text": "".join(getattr(c, "text", "") or "" for c in contents)}
                elif kind == "resources":
                    listed = await client.list_skill_resources()
                    result = {"uris": sorted(str(r.uri) for r in listed)}
                elif kind == "verify":
                    skill = await client.read_skill(uri, cache_mode="bypass")
                    result = {"verified": sorted(skill.files) if hasattr(skill, "files") else True}
                else:
                    raise SystemExit(f"unknown action {action!r}")
            except Exception as exc:  # the test reads what failed and how
                result = {"error": failure(exc)}
            out["actions"][action] = result
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
