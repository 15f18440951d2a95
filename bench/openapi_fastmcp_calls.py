"""FastMCP's calls checked like the gateway's: the Swagger Petstore through
`FastMCP.from_openapi` (FastMCP as pinned in tests/peers/requirements-lambda.txt), the same
calls tests/suite/openapi_peers.rs makes through the gateway, plus `uploadFile` (multipart,
which the gateway skips), each sent to Stoplight Prism as a validating mock (`--errors`) and
judged by Prism's verdict in its log ("passed" / "did not pass the validation rules").

Usage: tests/peers/.venv-lambda/bin/python bench/openapi_fastmcp_calls.py   (prints a Markdown table)
"""

import asyncio
import json
import os
import socket
import subprocess
import time

import httpx
from fastmcp import FastMCP

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PEERS = os.path.join(ROOT, "tests/peers")
DOC = os.path.join(PEERS, "node_modules/@readme/oas-examples/3.0/json/petstore.json")
PRISM = os.path.join(PEERS, "node_modules/@stoplight/prism-cli/dist/index.js")

CALLS = [
    ("findPetsByStatus", {"status": ["available", "sold"]}, "query array (form, exploded)"),
    ("findPetsByTags", {"tags": ["manga & anime", "ペット"]}, "query values to percent-encode"),
    ("getPetById", {"petId": 7}, "integer path, api_key header scheme"),
    ("deletePet", {"petId": 7, "api_key": "caller-key"}, "header parameter"),
    ("updatePetWithForm", {"petId": 7, "name": "Rex", "status": "sold"}, "form body"),
    ("placeOrder", {"id": 3, "petId": 7, "quantity": 2, "shipDate": "2026-11-27T17:00:00Z", "status": "placed", "complete": False}, "JSON body"),
    ("addPet", {"name": "Rex", "photoUrls": ["https://example.com/rex.png"], "category": {"id": 1, "name": "dogs"},
                "tags": [{"id": 2, "name": "good"}], "status": "available"}, "JSON body by $ref"),
    ("loginUser", {"username": "ミカ", "password": "p&ss=1 ?#"}, "reserved characters in query"),
    ("getUserByName", {"username": "user one ä"}, "path segment to percent-encode"),
    ("uploadFile", {"petId": 7, "additionalMetadata": "cover", "file": "aGVsbG8="}, "multipart body"),
]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def verdicts(log_path):
    out = []
    for line in open(log_path, encoding="utf-8", errors="replace"):
        if "did not pass the validation rules" in line:
            out.append("refused")
        elif "passed the validation rules" in line:
            out.append("passed")
    return out


async def main():
    port = free_port()
    log_path = f"/tmp/prism-fastmcp-{port}.log"
    with open(log_path, "w") as log:
        prism = subprocess.Popen(["node", PRISM, "mock", DOC, "--errors", "--host", "127.0.0.1", "--port", str(port)],
                                 stdout=log, stderr=log, env={**os.environ, "NO_COLOR": "1"})
    try:
        while "Prism is listening" not in open(log_path).read():
            if prism.poll() is not None:
                raise SystemExit(open(log_path).read())
            time.sleep(0.1)
        client = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}",
                                   headers={"api_key": "special-key", "Authorization": "Bearer a-token"})
        server = FastMCP.from_openapi(openapi_spec=json.load(open(DOC)), client=client, name="petstore")
        print("| operation | what it exercises | FastMCP's request: Prism's verdict | FastMCP's answer |")
        print("|---|---|---|---|")
        for tool, args, what in CALLS:
            before = len(verdicts(log_path))
            try:
                result = await server.call_tool(tool, args)
                answer = "result" if result else "empty"
            except Exception as e:  # FastMCP raises on an HTTP error status
                answer = f"error: {str(e).splitlines()[0][:90]}"
            # Prism logs its verdict before it answers; a request FastMCP never sent has none.
            time.sleep(0.5)
            got = verdicts(log_path)
            verdict = got[before] if len(got) > before else "no request sent"
            print(f"| `{tool}` | {what} | {verdict} | {answer.replace('|', '/')} |")
    finally:
        prism.terminate()
        prism.wait()


if __name__ == "__main__":
    asyncio.run(main())
