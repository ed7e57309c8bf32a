"""A stdio "MCP server" that misbehaves in one chosen way (the first argument):

* ``silent``: reads its stdin and never answers anything, not even ``initialize``;
* ``no_list``: answers ``initialize``, never ``tools/list``, and ignores SIGTERM;
* ``flood``: writes lines of junk to stdout as fast as it can, from the start;
* ``flood_on_call``: answers ``initialize`` and ``tools/list`` (one tool, ``echo``),
  then floods stdout with junk when the tool is called.

It writes its process id to the file named by the second argument, so a test can
check that the process was stopped.
"""

import json
import os
import signal
import sys

MODE, PID_FILE = sys.argv[1], sys.argv[2]
with open(PID_FILE, "w", encoding="utf-8") as handle:
    handle.write(str(os.getpid()))

TOOL = {"name": "echo", "inputSchema": {"type": "object", "properties": {}}}


def answer(request: dict, result: dict) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}) + "\n")
    sys.stdout.flush()


def flood() -> None:
    junk = "this is not JSON-RPC " * 8 + "\n"
    while True:
        sys.stdout.write(junk)


if MODE == "flood":
    flood()
if MODE == "no_list":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
for line in sys.stdin:
    request = json.loads(line)
    if MODE == "silent" or "id" not in request:
        continue
    if request["method"] == "initialize":
        answer(request, {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "misbehaving", "version": "1"},
        })  # fmt: skip
    elif request["method"] == "tools/list" and MODE == "flood_on_call":
        answer(request, {"tools": [TOOL]})
    elif request["method"] == "tools/call":
        flood()
