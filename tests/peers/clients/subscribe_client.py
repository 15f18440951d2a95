"""The official Python MCP SDK (2.x) client subscribing to resources through the gateway, for
the gateway's subscription tests.

Usage: subscribe_client.py URL MODE URI [URI ...] [--until URI]

MODE "legacy": the session era — `initialize` (the SDK opens the GET stream of its session by
itself), then `resources/subscribe` for each URI; `notifications/resources/updated` reaches the
client's message handler.
MODE "2026-07-28": the modern era — `Client.listen(resource_subscriptions=[URI, ...])`
(`subscriptions/listen`); an update arrives as a `ResourceUpdated` event.

Prints JSON lines on stdout (flushed):
  {"event": "subscribed", "honored": [uris]}   once every subscription is made (legacy: the
                                                URIs asked; modern: those acknowledged);
  {"event": "updated", "uri": URI}              for each update received;
and exits 0 (closing its session, or its listen stream) after the first update for the
`--until` URI (default: the first URI). Exits 1 with the error on stderr if it does not
arrive within 120 s.
"""

import json
import sys

import anyio

from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourceUpdated


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


async def legacy(url: str, uris: list[str], until: str) -> None:
    done = anyio.Event()

    async def on_message(message) -> None:
        root = getattr(message, "root", message)
        if getattr(root, "method", None) == "notifications/resources/updated":
            uri = str(root.params.uri)
            emit(event="updated", uri=uri)
            if uri == until:
                done.set()

    async with Client(streamable_http_client(url), mode="legacy", cache=None, message_handler=on_message) as client:
        for uri in uris:
            await client.subscribe_resource(uri)
        emit(event="subscribed", honored=uris)
        with anyio.fail_after(120):
            await done.wait()


async def modern(url: str, mode: str, uris: list[str], until: str) -> None:
    async with Client(streamable_http_client(url), mode=mode, cache=None) as client:
        async with client.listen(resource_subscriptions=uris) as subscription:
            emit(event="subscribed", honored=sorted(subscription.honored.resource_subscriptions or []))
            with anyio.fail_after(120):
                async for event in subscription:
                    if isinstance(event, ResourceUpdated):
                        emit(event="updated", uri=event.uri)
                        if event.uri == until:
                            break


async def main(argv: list[str]) -> None:
    until = None
    if "--until" in argv:
        at = argv.index("--until")
        until = argv[at + 1]
        argv = argv[:at] + argv[at + 2 :]
    if len(argv) < 3:
        raise SystemExit("usage: subscribe_client.py URL MODE URI [URI ...] [--until URI]")
    url, mode, uris = argv[0], argv[1], argv[2:]
    until = until or uris[0]
    if mode == "legacy":
        await legacy(url, uris, until)
    else:
        await modern(url, mode, uris, until)


if __name__ == "__main__":
    try:
        anyio.run(main, sys.argv[1:])
    except SystemExit:
        raise
    except BaseException as error:  # noqa: BLE001 - report any failure to the test
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        print(f"{type(error).__name__}: {error}", file=sys.stderr)
        sys.exit(1)
