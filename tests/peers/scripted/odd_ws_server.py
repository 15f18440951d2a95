"""A WebSocket server that is not an MCP one, for the gateway's tests (runs in tests/peers/.venv-ws).

    python odd_ws_server.py    # prints {"listen": "127.0.0.1:PORT"}

Accepts any upgrade on any path without selecting a subprotocol (it offers none), as a plain
WebSocket service would, and echoes text frames back.
"""

import asyncio
import json

import websockets


async def echo(connection):
    async for message in connection:
        await connection.send(message)


async def main():
    async with websockets.serve(echo, "127.0.0.1", 0) as server:
        port = server.sockets[0].getsockname()[1]
        print(json.dumps({"listen": f"127.0.0.1:{port}"}), flush=True)
        await asyncio.Future()


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        pass
