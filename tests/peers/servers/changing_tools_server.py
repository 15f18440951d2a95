"""A Python MCP SDK (2.x) server whose tools change when one of its tools is called.

Usage: changing_tools_server.py stdio
       changing_tools_server.py http PORT

Tools:
  grow(name)    adds a tool called NAME (it answers its own name), then says the tool list
                changed;
  shrink(name)  removes the tool NAME, then says the tool list changed;
  ping_me()     answers "pong" (changes nothing);
  add_prompt(name)  adds a prompt called NAME (it answers "prompt NAME"), then says the prompt
                list changed;
  redescribe_prompt(name, description)  replaces the prompt NAME by one of the same name with
                DESCRIPTION (it answers "prompt NAME, redescribed"), then says the prompt list
                changed (a definition that changes after it was trusted).
Prompts: `hello` from the start.

"Says the tool list changed" in both eras, as the SDK offers it: `ctx.notify_tools_changed()`
publishes to the server's `subscriptions/listen` streams (2026-07-28), and the session's
`send_tool_list_changed()` sends `notifications/tools/list_changed` on a session-era
connection (stdio, or the GET stream of a streamable-HTTP session).

Every `tools/list` it answers appends a line `tools/list` to the file named by the
environment variable CHANGING_TOOLS_LOG (when set), so a test can count refreshes.

`http` serves streamable HTTP on 127.0.0.1:PORT/mcp and prints `READY <port>` once listening.
"""

import os
import sys

import anyio
import uvicorn

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.prompts import Prompt

server = MCPServer("changing-tools")
LOG = os.environ.get("CHANGING_TOOLS_LOG")


def _log(line: str) -> None:
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


async def _changed(ctx: Context) -> None:
    await ctx.notify_tools_changed()
    try:
        await ctx.request_context.session.send_tool_list_changed()
    except Exception:  # noqa: BLE001 - a modern single exchange has no session channel
        pass


def _answering(name: str):
    def tool() -> str:
        return name

    tool.__name__ = name
    return tool


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool called NAME and say the tool list changed."""
    server.add_tool(_answering(name), name=name, description=f"added at run time: {name}")
    await _changed(ctx)
    return f"added {name}"


@server.tool()
async def shrink(name: str, ctx: Context) -> str:
    """Remove the tool NAME and say the tool list changed."""
    server.remove_tool(name)
    await _changed(ctx)
    return f"removed {name}"


@server.prompt()
def hello() -> str:
    """A prompt there from the start."""
    return "hello"


@server.tool()
async def add_prompt(name: str, ctx: Context) -> str:
    """Add a prompt called NAME and say the prompt list changed."""

    def prompt() -> str:
        return f"prompt {name}"

    prompt.__name__ = name
    server.add_prompt(Prompt.from_function(prompt, name=name, description=f"added at run time: {name}"))
    await ctx.notify_prompts_changed()
    try:
        await ctx.request_context.session.send_prompt_list_changed()
    except Exception:  # noqa: BLE001 - a modern single exchange has no session channel
        pass
    return f"added prompt {name}"


@server.tool()
async def redescribe_prompt(name: str, description: str, ctx: Context) -> str:
    """Replace the prompt NAME by one with DESCRIPTION and say the prompt list changed."""

    def prompt() -> str:
        return f"prompt {name}, redescribed"

    prompt.__name__ = name
    server.remove_prompt(name)
    server.add_prompt(Prompt.from_function(prompt, name=name, description=description))
    await ctx.notify_prompts_changed()
    try:
        await ctx.request_context.session.send_prompt_list_changed()
    except Exception:  # noqa: BLE001 - a modern single exchange has no session channel
        pass
    return f"redescribed prompt {name}"


@server.tool()
def ping_me() -> str:
    """Answer pong."""
    return "pong"


_list_tools = server.list_tools


async def _counted_list_tools(*args, **kwargs):
    _log("tools/list")
    return await _list_tools(*args, **kwargs)


server.list_tools = _counted_list_tools  # type: ignore[method-assign]


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def _serve_http(port: int) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning")
    await _Uvicorn(config).serve()


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "stdio":
        server.run("stdio")
    elif len(sys.argv) == 3 and sys.argv[1] == "http":
        anyio.run(_serve_http, int(sys.argv[2]))
    else:
        raise SystemExit("usage: changing_tools_server.py stdio | http PORT")
