"""A misbehaving MCP server on stdio for the gateway's tests (Python stdlib only).

    python3 stdio_peer.py EVENTS_FILE [--ignore-sigterm]

Appends one line per event to EVENTS_FILE, so a test can count what happened without a
clock: `spawn <pid>` when it starts, `cancelled <requestId>` for each
notifications/cancelled it receives, `exit <pid>` when stdin ends. Prints one stderr line
at start ("stdio-peer starting pid=<pid>"). With --ignore-sigterm it ignores SIGTERM and
does not exit when its stdin ends (the gateway must kill it after its grace).

Tools (session era, no annotations, so the gateway never retries them):
  ok        answers {"ok": true, "pid": <pid>}
  die       writes half an answer, then exits with status 3
  wrong_id  answers with an id nobody used (id + 1000000), and nothing else
  garbage   writes lines that are not JSON-RPC, and no answer
  hang      never answers
  big       answers with one line of 100 KB
  held      answers only after the next `ok` call, and after that call's answer (answers
            out of request order); appends `held <id>` to EVENTS_FILE when it arrives
  environ   answers {"names": [names of its environment variables], "PEER_SETTING": value}
  shout     writes 1000 stderr lines of 3000 bytes each, then answers like `ok`
  ask       sends the gateway a `ping` and a `roots/list` request, waits for both
            answers, and returns them as structuredContent {"ping": …, "roots": …}
"""

import json
import os
import signal
import sys
import time

EVENTS = sys.argv[1]
PID = os.getpid()


def event(text):
    with open(EVENTS, "a") as f:
        f.write(text + "\n")


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def result(id_, structured):
    send({"jsonrpc": "2.0", "id": id_, "result": {
        "content": [{"type": "text", "text": json.dumps(structured)}],
        "structuredContent": structured,
    }})


TOOLS = [
    {"name": name, "description": f"stdio peer tool {name}", "inputSchema": {"type": "object"}}
    for name in ["ok", "held", "die", "wrong_id", "garbage", "hang", "big", "shout", "environ", "ask"]
]


def main():
    if "--ignore-sigterm" in sys.argv:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    event(f"spawn {PID}")
    sys.stderr.write(f"stdio-peer starting pid={PID}\n")
    sys.stderr.flush()
    asked = {}  # id of the pending `ask` call -> answers gathered so far
    held = []  # ids of `held` calls waiting for the next `ok`
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        message = json.loads(line)
        method = message.get("method")
        id_ = message.get("id")
        if method is None:
            # An answer to one of our requests (for `ask`).
            for call_id, answers in asked.items():
                if id_ in ("p1", "r1"):
                    answers["ping" if id_ == "p1" else "roots"] = message.get("result", message.get("error"))
                    if len(answers) == 2:
                        result(call_id, answers)
                        del asked[call_id]
                    break
            continue
        if method == "initialize":
            send({"jsonrpc": "2.0", "id": id_, "result": {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "stdio-peer", "version": "1"},
            }})
        elif method == "notifications/cancelled":
            event(f"cancelled {message['params']['requestId']}")
        elif method.startswith("notifications/"):
            pass
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": id_, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            name = message["params"]["name"]
            if name == "ok":
                result(id_, {"ok": True, "pid": PID})
                for waiting in held:
                    result(waiting, {"held": True, "released_by": id_})
                held.clear()
            elif name == "held":
                held.append(id_)
                event(f"held {id_}")
            elif name == "die":
                sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": {"content": [{"ty' % json.dumps(id_))
                sys.stdout.flush()
                os._exit(3)
            elif name == "wrong_id":
                result(id_ + 1000000, {"stolen": True})
            elif name == "garbage":
                sys.stdout.write("this is not JSON\n")
                sys.stdout.write('{"jsonrpc": "2.0"}\n')
                sys.stdout.write("[1, 2\n")
                sys.stdout.flush()
            elif name == "hang":
                pass
            elif name == "environ":
                result(id_, {"names": sorted(os.environ), "PEER_SETTING": os.environ.get("PEER_SETTING")})
            elif name == "shout":
                sys.stderr.write(("E" * 3000 + "\n") * 1000)
                sys.stderr.flush()
                result(id_, {"ok": True, "pid": PID})
            elif name == "big":
                result(id_, {"blob": "x" * 100_000})
            elif name == "ask":
                asked[id_] = {}
                send({"jsonrpc": "2.0", "id": "p1", "method": "ping"})
                send({"jsonrpc": "2.0", "id": "r1", "method": "roots/list"})
            else:
                send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32602, "message": f"unknown tool {name}"}})
        elif id_ is not None:
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32601, "message": "method not found"}})
    event(f"exit {PID}")
    if "--ignore-sigterm" in sys.argv:
        while True:
            time.sleep(3600)


main()
