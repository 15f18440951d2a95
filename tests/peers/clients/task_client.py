"""The official Python MCP SDK (2.x) client driving a 2025-11-25 task through the gateway, for
tests/suite/tasks.rs: the SDK has the task request types but no task helpers, so the requests
are sent with the client session's `send_request` (the task-augmented call through the same
session's dispatcher, see `send_raw`).

Usage: task_client.py URL TOOL TOPIC INTERPRETATION

Connects in the session era ("legacy": initialize declaring elicitation, Mcp-Session-Id), calls
TOOL with {"topic": TOPIC, "ambiguous": true} as a task, polls tasks/get until the task stops
`working` (it goes `input_required` when the server wants a clarification), then calls
tasks/result: the server asks its question on that request's stream, the elicitation callback
answers {"interpretation": INTERPRETATION}, and the final result arrives. Prints ONE JSON line:
    {"created": <CreateTaskResult>, "statuses": [...], "asked": [<message>...],
     "result": <CallToolResult>, "final": <GetTaskResult>}
Any failure exits 1 with the error on stderr.
"""

import asyncio
import json
import sys

import mcp_types as types
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client

# Polling gives up after this many tasks/get (the server's stages take about a second each).
MAX_POLLS = 240


async def send_raw(session, request) -> dict:
    """`session.send_request` without its result check: the SDK checks a `tools/call` answer as a
    `CallToolResult`, and a task-augmented call is answered with a `CreateTaskResult`. Same
    stamping (headers, `_meta`) and the same dispatcher as `send_request`."""
    data = request.model_dump(by_alias=True, mode="json", exclude_none=True)
    opts: dict = {}
    session._stamp(data, opts)
    return await session._dispatcher.send_raw_request(data["method"], data.get("params"), opts)


async def main(url: str, tool: str, topic: str, interpretation: str) -> None:
    asked: list[str] = []

    async def elicitation(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"interpretation": interpretation})

    dump = lambda r: r.model_dump(mode="json", by_alias=True, exclude_none=True)  # noqa: E731
    async with Client(
        streamable_http_client(url), mode="legacy", cache=None, elicitation_callback=elicitation
    ) as client:
        session = client.session
        created = types.CreateTaskResult.model_validate(
            await send_raw(
                session,
                types.CallToolRequest(
                    params=types.CallToolRequestParams(
                        name=tool,
                        arguments={"topic": topic, "ambiguous": True},
                        task=types.TaskMetadata(ttl=120000),
                    )
                ),
            )
        )
        task_id = created.task.task_id
        statuses = [created.task.status]
        for _ in range(MAX_POLLS):
            got = await session.send_request(
                types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult
            )
            if got.status != statuses[-1]:
                statuses.append(got.status)
            if got.status != "working":
                break
            await asyncio.sleep(0.25)
        result = await session.send_request(
            types.GetTaskPayloadRequest(params=types.GetTaskPayloadRequestParams(task_id=task_id)),
            types.CallToolResult,
            request_read_timeout_seconds=120,
        )
        final = await session.send_request(
            types.GetTaskRequest(params=types.GetTaskRequestParams(task_id=task_id)), types.GetTaskResult
        )
    print(
        json.dumps(
            {"created": dump(created), "statuses": statuses, "asked": asked, "result": dump(result), "final": dump(final)}
        ),
        flush=True,
    )


if __name__ == "__main__":
    try:
        asyncio.run(main(*sys.argv[1:5]))
    except BaseException as error:  # noqa: BLE001 - report any failure to the test
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
