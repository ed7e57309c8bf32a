"""A streamable-HTTP MCP server written with the SDK, on a loopback port, for tests.

Its tools: ``add`` (structured output), ``shout`` (text only), ``boom`` (an error
that quotes the request's token), ``slow`` (sleeps: for timeouts) and ``evolving``,
whose input schema :meth:`McpFake.change_schema` changes between refreshes. It
refuses requests without the expected ``X-Token`` header.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import anyio
import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from starlette.types import ASGIApp, Receive, Scope, Send

from tests.startup import start_deadline

TOKEN = "fake-mcp-token-1234"


class McpFake:
    def __init__(self) -> None:
        self.server = MCPServer("fake", version="3.1.4")  # the handshake reports it
        self.calls: list[str] = []
        self.server.add_tool(
            self.add,
            name="add",
            description="Add two integers.",
            annotations=ToolAnnotations(idempotentHint=True),
        )
        self.server.add_tool(
            self.shout, name="shout", description="Upper-case a text.", structured_output=False
        )
        self.server.add_tool(self.boom, name="boom", description="Always fails.")
        self.server.add_tool(
            self.slow,
            name="slow",
            description="Sleeps.",
            annotations=ToolAnnotations(readOnlyHint=True),
        )
        self.server.add_tool(self.evolving_v1, name="evolving", description="Version 1.")
        self.port = 0

    def add(self, a: int, b: int) -> dict[str, int]:
        self.calls.append("add")
        return {"sum": a + b}

    def shout(self, text: str) -> str:
        self.calls.append("shout")
        return text.upper()

    def boom(self) -> str:
        self.calls.append("boom")
        raise ToolError(f"the backend refused token {TOKEN}")

    async def slow(self, seconds: float) -> str:
        self.calls.append("slow")
        await anyio.sleep(seconds)
        return "done"

    def evolving_v1(self, city: str) -> str:
        return city

    def evolving_v2(self, city: str, country: str) -> str:
        return f"{city}, {country}"

    def change_schema(self) -> None:
        self.server.remove_tool("evolving")
        self.server.add_tool(self.evolving_v2, name="evolving", description="Version 2.")
        self.server.remove_tool("shout")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


def _token_required(app: ASGIApp) -> ASGIApp:
    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope["headers"])
            if headers.get(b"x-token") != TOKEN.encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"no token"})
                return
        await app(scope, receive, send)

    return guarded


@contextmanager
def running_mcp_fake() -> Iterator[McpFake]:
    fake = McpFake()
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        fake.port = probe.getsockname()[1]
    app = _token_required(fake.server.streamable_http_app())
    config = uvicorn.Config(app, host="127.0.0.1", port=fake.port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_deadline()  # a thread, but on the same busy CPUs
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    if not server.started:
        raise RuntimeError("the fake MCP server did not start")
    try:
        yield fake
    finally:
        server.should_exit = True
        thread.join(10)
