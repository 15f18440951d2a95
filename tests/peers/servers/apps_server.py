"""An MCP Apps server on the official Python SDK (2.3, `mcp.server.apps.Apps`), for the
gateway's MCP Apps tests (tests/suite/apps.rs).

Usage: apps_server.py (PORT | --stdio) [--app NAME]

NAME (default "clock") names its UI resource `ui://NAME/app.html` and appears in the HTML, so two
instances with the same tools (a collision) have different apps.

- `get_time` (visible to the model and the app, `_meta.ui.resourceUri` = the app): answers
  "apps host: …" when the client negotiated MCP Apps (`client_supports_apps`), else
  "text-only: …", as SEP-2133 asks a server to degrade;
- `refresh_time` (`_meta.ui.visibility = ["app"]`): for the app only;
- `ui://NAME/app.html`: `text/html;profile=mcp-app`, with `_meta.ui` CSP (connect and
  resource domains), permissions (clipboard write) and a domain.

Streamable HTTP at /mcp; GET /control/initializes -> the `capabilities` of every `initialize`
the server saw, in order. Prints `READY <port>` once listening (HTTP).
"""

import argparse
import json
import sys

import anyio
import uvicorn
from mcp.server.apps import Apps, ResourceCsp, ResourcePermissions, client_supports_apps
from mcp.server.mcpserver import Context, MCPServer

INITIALIZES: list[dict] = []


def build(app: str) -> MCPServer:
    apps = Apps()
    uri = f"ui://{app}/app.html"

    @apps.tool(resource_uri=uri, description="The current time, shown by an app.")
    def get_time(ctx: Context) -> str:
        who = "apps host" if client_supports_apps(ctx) else "text-only"
        return f"{who}: 12:00 from {app}"

    @apps.tool(resource_uri=uri, visibility=["app"], description="Refreshes the app's clock.")
    def refresh_time(ctx: Context) -> str:
        return f"refreshed by {app}"

    apps.add_html_resource(
        uri,
        f"<!doctype html><html><body><p id=app>{app}</p><script>document.body.dataset.ran='yes'</script></body></html>",
        csp=ResourceCsp(connect_domains=["https://api.example.com"], resource_domains=["https://cdn.example.com"]),
        permissions=ResourcePermissions(clipboard_write={}),
        domain=f"{app}.apps.example.com",
    )
    return MCPServer(f"apps-{app}", extensions=[apps])


class RecordInitializes:
    """Pure ASGI middleware: records each `initialize`'s capabilities; serves the record."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["path"] == "/control/initializes":
            body = json.dumps(INITIALIZES).encode()
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
            return await send({"type": "http.response.body", "body": body})
        chunks = []
        while True:
            message = await receive()
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        try:
            request = json.loads(body) if body else None
        except ValueError:
            request = None
        if isinstance(request, dict) and request.get("method") == "initialize":
            INITIALIZES.append((request.get("params") or {}).get("capabilities"))
        sent = False

        async def replay():
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        return await self.app(scope, replay, send)


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


async def _serve(server: MCPServer, port: int) -> None:
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    config = uvicorn.Config(RecordInitializes(app), host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    await _Uvicorn(config).serve()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("port", nargs="?", type=int)
    parser.add_argument("--stdio", action="store_true")
    parser.add_argument("--app", default="clock")
    args = parser.parse_args()
    server = build(args.app)
    if args.stdio:
        server.run("stdio")
    else:
        anyio.run(_serve, server, args.port)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(0)
