"""A FastMCP server serving Agent Skills through the MCP Skills extension (SEP-2640,
`io.modelcontextprotocol/skills`): every folder holding a `SKILL.md` under ROOT is a skill at
`skill://<path>/SKILL.md`, its files resources read with `resources/read`, listed by
`skills/list` and got by `skills/get` with their digests. Run from tests/peers/.venv-skills.

Usage: skills_server.py ROOT (http PORT | stdio)
Over HTTP it prints `READY <port>` once it listens (streamable HTTP at /mcp). SKILLS_PAGE_SIZE
in the environment sets the server's page size of its lists (`skills/list` included);
SKILLS_RELOAD=1 makes it read the folders again on every request (a changed file is served, and
its digest changes, at once).
"""

import os
import socket
import sys
import threading
import time

from fastmcp import FastMCP
from fastmcp.skills.extension import SkillsExtension
from fastmcp.skills.provider import SkillsDirectoryProvider


def main() -> None:
    root, transport = sys.argv[1], sys.argv[2]
    skills = SkillsDirectoryProvider(roots=root, reload=os.environ.get("SKILLS_RELOAD") == "1")
    page_size = int(os.environ.get("SKILLS_PAGE_SIZE", "0")) or None
    app = FastMCP("skills-peer", providers=[skills], list_page_size=page_size)
    app.add_extension(SkillsExtension(providers=[skills]))

    @app.tool
    def ping() -> str:
        """Answers pong."""
        return "pong"

    if transport == "stdio":
        app.run("stdio", show_banner=False)
        return
    port = int(sys.argv[3])

    def announce() -> None:
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                print(f"READY {port}", flush=True)
                return
            except OSError:
                time.sleep(0.05)

    threading.Thread(target=announce, daemon=True).start()
    app.run("http", host="127.0.0.1", port=port, show_banner=False)


if __name__ == "__main__":
    main()
