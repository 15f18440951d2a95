"""The official conformance suite's server tool fixtures, on the Python MCP SDK (2.x).

Usage: conformance_server.py PORT [--log-requests] [--refuse-initialize]

The suite (`@modelcontextprotocol/conformance`) ships the scenarios but no server; this is
the upstream its tool scenarios expect, written from the scenarios' own descriptions:
`test_simple_text`, `test_image_content`, `test_audio_content`, `test_embedded_resource`,
`test_multiple_content_types`, `test_tool_with_logging`, `test_error_handling`,
`test_tool_with_progress`, `test_sampling`, `test_elicitation`, `test_elicitation_sep1034_defaults`,
`test_elicitation_sep1330_enums` and `json_schema_2020_12_tool`; and the fixtures of its
resource, prompt and completion scenarios: resources `test://static-text`,
`test://static-binary`, `test://watched-resource`, the template `test://template/{id}/data`,
prompts `test_simple_prompt`, `test_prompt_with_arguments`, `test_prompt_with_embedded_resource`,
`test_prompt_with_image`, and completion of prompt arguments.
Serves streamable HTTP (session era with SSE answers, and the stateless 2026-07-28 era) on
127.0.0.1:PORT/mcp. Prints `READY <port>` once listening.

Sampling and elicitation are server->client requests: when the client did not declare the
capability the tool fails with `isError` (the scenarios' implementation note), instead of
waiting for an answer that cannot come.

With `--log-requests`, every HTTP exchange is printed as one line when its answer starts, so a
test can see what the upstream received: `HTTP <METHOD> <PATH> <STATUS> session=<Mcp-Session-Id
sent> new_session=<Mcp-Session-Id answered> rpc=<JSON-RPC method, or "response" for a POSTed
response> client=<initialize clientInfo.name> caps=<initialize capabilities, comma-separated>`.
With `--refuse-initialize`, every `initialize` is answered HTTP 400 (a JSON-RPC -32601), as by
a server that speaks only the sessionless 2026-07-28 era.
"""

import argparse
import base64
import json

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    AudioContent,
    ClientCapabilities,
    Completion,
    ElicitationCapability,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    SamplingCapability,
    SamplingMessage,
    SetLevelRequestParams,
    TextContent,
    TextResourceContents,
)

server = MCPServer("conformance-fixtures")

# A 1x1 red PNG and a 1-sample 8 kHz mono WAV.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
WAV = base64.b64encode(
    b"RIFF" + (37).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
    + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (8000).to_bytes(4, "little")
    + (8000).to_bytes(4, "little") + (1).to_bytes(2, "little") + (8).to_bytes(2, "little")
    + b"data" + (1).to_bytes(4, "little") + b"\x80"
).decode()


@server.resource("test://static-text", name="static-text", mime_type="text/plain", description="A static text resource")
def static_text() -> str:
    return "This is the content of the static text resource."


@server.resource("test://static-binary", name="static-binary", mime_type="image/png", description="A static binary resource")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@server.resource("test://watched-resource", name="watched-resource", mime_type="text/plain", description="A resource to subscribe to")
def watched_resource() -> str:
    return "Watched resource content."


@server.resource("test://template/{id}/data", name="template-data", mime_type="application/json", description="A resource template")
def template_data(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"})


@server.prompt(description="A simple prompt without arguments")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@server.prompt(description="A prompt with arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@server.prompt(description="A prompt with an embedded resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list:
    return [
        {"role": "user", "content": EmbeddedResource(type="resource", resource=TextResourceContents(
            uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."))},
        {"role": "user", "content": TextContent(type="text", text="Please process the embedded resource above.")},
    ]


@server.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list:
    return [
        {"role": "user", "content": ImageContent(type="image", data=PNG, mime_type="image/png")},
        {"role": "user", "content": TextContent(type="text", text="Please analyze the image above.")},
    ]


@server.completion()
async def complete(ref, argument, context) -> Completion:
    options = ["paris", "park", "party"] if argument.name == "arg1" else ["one", "two"]
    return Completion(values=[o for o in options if o.startswith(argument.value)], total=None, has_more=False)


@server.tool(description="Returns a simple text response")
def test_simple_text() -> list[TextContent]:
    return [TextContent(type="text", text="This is a simple text response for testing.")]


@server.tool(description="Returns an image")
def test_image_content() -> list[ImageContent]:
    return [ImageContent(type="image", data=PNG, mime_type="image/png")]


@server.tool(description="Returns audio")
def test_audio_content() -> list[AudioContent]:
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


@server.tool(description="Returns an embedded resource")
def test_embedded_resource() -> list[EmbeddedResource]:
    resource = TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."
    )
    return [EmbeddedResource(type="resource", resource=resource)]


@server.tool(description="Returns text, an image and a resource")
def test_multiple_content_types() -> list[TextContent | ImageContent | EmbeddedResource]:
    resource = TextResourceContents(
        uri="test://mixed-content-resource", mime_type="application/json", text='{"test":"data","value":123}'
    )
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        EmbeddedResource(type="resource", resource=resource),
    ]


@server.tool(description="Sends three log messages while it runs")
async def test_tool_with_logging(ctx: Context) -> str:
    await ctx.info("Tool execution started")
    await anyio.sleep(0.05)
    await ctx.info("Tool processing data")
    await anyio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


@server.tool(description="Always fails")
def test_error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


@server.tool(description="Reports progress 0, 50, 100 of 100")
async def test_tool_with_progress(ctx: Context) -> str:
    await ctx.report_progress(0, 100)
    await anyio.sleep(0.05)
    await ctx.report_progress(50, 100)
    await anyio.sleep(0.05)
    await ctx.report_progress(100, 100)
    return "Tool with progress executed successfully"


@server.tool(description="Asks the client's LLM (sampling/createMessage)")
async def test_sampling(prompt: str, ctx: Context) -> str:
    if not ctx.session.check_client_capability(ClientCapabilities(sampling=SamplingCapability())):
        raise ToolError("the client does not support sampling")
    result = await ctx.session.create_message(
        [SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
        max_tokens=100,
        related_request_id=ctx.request_id,
    )
    text = getattr(result.content, "text", str(result.content))
    return f"LLM response: {text}"


@server.tool(description="Asks the user (elicitation/create)")
async def test_elicitation(message: str, ctx: Context) -> str:
    if not ctx.session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability())):
        raise ToolError("the client does not support elicitation")
    schema = {
        "type": "object",
        "properties": {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        "required": ["username", "email"],
    }
    result = await ctx.session.elicit(message, schema, related_request_id=ctx.request_id)
    return f"User response: action={result.action}, content={result.content}"


async def _elicit(ctx: Context, message: str, properties: dict) -> str:
    if not ctx.session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability())):
        raise ToolError("the client does not support elicitation")
    schema = {"type": "object", "properties": properties, "required": []}
    result = await ctx.session.elicit(message, schema, related_request_id=ctx.request_id)
    return f"Elicitation completed: action={result.action}, content={json.dumps(result.content)}"


@server.tool(description="Asks the user with a default for every primitive type (SEP-1034)")
async def test_elicitation_sep1034_defaults(ctx: Context) -> str:
    return await _elicit(ctx, "Please review and update the form fields with defaults", {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": True},
    })


@server.tool(description="Asks the user with every enum variant (SEP-1330)")
async def test_elicitation_sep1330_enums(ctx: Context) -> str:
    return await _elicit(ctx, "Please select options from the enum fields", {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"},
        ]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"},
            {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"},
        ]}},
    })


@server.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str = "", address: dict | None = None) -> str:
    return f"name={name} address={address}"


server._tool_manager.get_tool("json_schema_2020_12_tool").parameters = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
    "additionalProperties": False,
}


async def _set_level(ctx, params: SetLevelRequestParams) -> EmptyResult:
    """`logging/setLevel`: every message these tools log is at info, so any level is accepted."""
    return EmptyResult()


server._lowlevel_server.add_request_handler("logging/setLevel", SetLevelRequestParams, _set_level)


def _refusing_initialize(app):
    """The ASGI app, answering every `initialize` with HTTP 400 and a JSON-RPC error, as a server
    that speaks only the sessionless 2026-07-28 era does (see `--refuse-initialize`)."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body = bytearray()
        while True:
            message = await receive()
            body.extend(message.get("body", b""))
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        try:
            method = json.loads(body).get("method")
        except (ValueError, AttributeError):
            method = None
        if method == "initialize":
            answer = json.dumps({"jsonrpc": "2.0", "id": None, "error": {
                "code": -32601, "message": "initialize: this server speaks 2026-07-28 only"}}).encode()
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": answer})
            return
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await app(scope, replay, send)

    return wrapped


def _logging(app):
    """The ASGI app, printing one line per HTTP exchange (see the module docs)."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        sent = dict(scope["headers"]).get(b"mcp-session-id", b"").decode()
        body = bytearray()
        seen = {"rpc": "", "client": "", "caps": ""}

        async def receive_logged():
            message = await receive()
            if message["type"] == "http.request":
                body.extend(message.get("body", b""))
                if not message.get("more_body") and body:
                    try:
                        parsed = json.loads(body)
                    except ValueError:
                        parsed = None
                    if isinstance(parsed, dict):
                        seen["rpc"] = parsed.get("method") or "response"
                        params = parsed.get("params") or {}
                        if seen["rpc"] == "initialize":
                            seen["client"] = (params.get("clientInfo") or {}).get("name", "")
                            seen["caps"] = ",".join(sorted((params.get("capabilities") or {}).keys()))
            return message

        async def send_logged(message):
            if message["type"] == "http.response.start":
                answered = dict(message.get("headers", [])).get(b"mcp-session-id", b"").decode()
                print(
                    f"HTTP {scope['method']} {scope['path']} {message['status']} session={sent} "
                    f"new_session={answered} rpc={seen['rpc']} client={seen['client']} caps={seen['caps']}",
                    flush=True,
                )
            await send(message)

        await app(scope, receive_logged, send_logged)

    return wrapped


class _Uvicorn(uvicorn.Server):
    async def startup(self, sockets=None) -> None:  # type: ignore[override]
        await super().startup(sockets=sockets)
        if self.started:
            print(f"READY {self.config.port}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("port", type=int)
    parser.add_argument("--log-requests", action="store_true")
    parser.add_argument("--refuse-initialize", action="store_true")
    args = parser.parse_args()
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    if args.refuse_initialize:
        app = _refusing_initialize(app)
    if args.log_requests:
        app = _logging(app)
    config = uvicorn.Config(app, host="127.0.0.1", port=args.port, log_level="warning")
    anyio.run(_Uvicorn(config).serve)


if __name__ == "__main__":
    main()
