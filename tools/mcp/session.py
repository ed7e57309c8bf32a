"""The MCP sessions of one run, driven from the engine's (synchronous) threads.

The SDK is asynchronous; :class:`McpSessions` runs its own event loop in one thread
(an anyio blocking portal) and opens one connected client per server on first use:
a stdio server's process is started then, an HTTP server's session initialized. The
object belongs to one run (``RunContext.mcp``; under Celery, one step's context) and
:meth:`McpSessions.close` stops the processes and ends the HTTP sessions — so a
session never carries one run's data into another. Calls from several threads of the
run go through the one loop and may run concurrently.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import ExitStack, asynccontextmanager
from typing import Any, TextIO

import mcp_types as types
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from tools.errors import ToolUnreachable
from tools.mcp.config import McpServer
from tools.redaction import Redactor
from tools.secrets import register_server_secrets
from tools.templating import render, render_text

_STDERR_TAIL = 600
logger = logging.getLogger("flowpilot.tools.mcp")


class McpSessions:
    """One run's connected MCP clients, keyed by server name. Close it when done."""

    def __init__(self, *, env: Mapping[str, str], redactor: Redactor) -> None:
        self._env = env
        self._redactor = redactor
        self._lock = threading.Lock()
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None
        self._clients: dict[str, tuple[McpServer, Client, ExitStack]] = {}

    def __enter__(self) -> McpSessions:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop every stdio process, end every HTTP session, then the event loop."""
        with self._lock:
            for name in sorted(self._clients):
                self._drop(name)
            self._portal = None
            self._stack.close()

    def run(self, server: McpServer, call: Any) -> Any:
        """``await call(client)`` on the server's connected client, from this thread."""
        portal, client = self._client(server)
        return portal.call(call, client)

    def register_secrets(self, server: McpServer) -> None:
        """Have the run's redactor mask the server's secret headers and environment
        values now (opening its session does too), before anything is opened."""
        register_server_secrets(self._redactor, server, self._env)

    def discard(self, server: McpServer) -> None:
        """Forget a broken session (its process died, the connection dropped): the
        next call opens a new one."""
        with self._lock:
            self._drop(server.name)

    def _drop(self, name: str) -> None:
        entry = self._clients.pop(name, None)
        if entry is not None:
            try:
                entry[2].close()
            except Exception:  # noqa: BLE001 -- a broken session may fail to close cleanly
                logger.warning("MCP server %s: the session did not close cleanly", name)

    def _client(self, server: McpServer) -> tuple[BlockingPortal, Client]:
        with self._lock:
            if self._portal is None:
                self._portal = self._stack.enter_context(start_blocking_portal())
            known = self._clients.get(server.name)
            if known is not None and known[0] == server:
                return self._portal, known[1]
            self._drop(server.name)
            register_server_secrets(self._redactor, server, self._env)
            stack = ExitStack()
            errlog = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8"))  # noqa: SIM115
            try:
                connected = _connected(server, self._env, errlog)
                client = stack.enter_context(self._portal.wrap_async_context_manager(connected))
            except Exception as exc:  # any failure to start or initialize the session
                error = self._unreachable(server, exc, errlog)
                stack.close()
                raise error from exc
            self._clients[server.name] = (server, client, stack)
            return self._portal, client

    def _unreachable(self, server: McpServer, exc: BaseException, errlog: TextIO) -> Exception:
        errlog.seek(0)
        tail = errlog.read()[-_STDERR_TAIL:].strip()
        detail = f"{type(exc).__name__}: {_describe(exc)}"
        if tail:
            detail += f"; its stderr ends: {tail}"
        message = f"MCP server {server.name!r} could not be reached ({server.transport}): {detail}"
        return ToolUnreachable(self._redactor.scrub_text(message))


def _describe(exc: BaseException) -> str:
    """The innermost messages of an exception (group), joined."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return str(exc) or type(exc).__name__


@asynccontextmanager
async def _connected(
    server: McpServer, env: Mapping[str, str], errlog: TextIO
) -> AsyncIterator[Client]:
    """An initialized client of ``server``, its templates rendered with ``env``."""
    if server.command is not None:
        params = StdioServerParameters(
            command=render_text(server.command, {}, env=env),
            args=[render_text(a, {}, env=env) for a in server.args],
            env={k: render_text(v, {}, env=env) for k, v in sorted(server.env.items())},
        )
        transport: Any = stdio_client(params, errlog=errlog)
    else:
        headers = render(server.headers, {}, env=env)
        headers = {k: str(v) for k, v in headers.items() if v not in (None, "")}
        url = render_text(server.url or "", {}, env=env)
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode="legacy", cache=None) as client:
                yield client
        return
    async with Client(transport, mode="legacy", cache=None) as client:
        yield client


async def list_all_tools(client: Client) -> list[types.Tool]:
    """Every tool the server lists, page after page."""
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        page = await client.list_tools(cursor=cursor, cache_mode="bypass")
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            break
    return tools
