"""The MCP sessions of one run, driven from the engine's (synchronous) threads.

The SDK is asynchronous; :class:`McpSessions` runs its own event loop in one thread
(an anyio blocking portal) and opens one connected client per server on first use:
a stdio server's process is started then, an HTTP server's session initialized. The
object belongs to one run (``RunContext.mcp``; under Celery, one step's context) and
:meth:`McpSessions.close` stops the processes and ends the HTTP sessions — so a
session never carries one run's data into another. Calls from several threads of the
run go through the one loop and may run concurrently.

Every phase has a deadline, so no server can hold a run or ``loadtools`` forever:
starting and the ``initialize`` handshake (``FLOWPILOT_MCP_START_TIMEOUT``), each
request (``run(..., within=...)``: listing tools ``FLOWPILOT_MCP_LIST_TIMEOUT``, a call
its tool's timeout) and closing (``FLOWPILOT_MCP_SHUTDOWN_TIMEOUT``). They are kept on
this side of the loop (a future waited with a timeout, the task cancelled past it), so
they hold whatever the SDK or the server does. A stdio server whose stdout carries a
line that is not JSON-RPC has its session closed at that line: one clear error, not a
log record per line of junk.

The ``mcp`` SDK is imported where a session connects, not at module import: every
engine context imports this module, and the SDK costs a large share of a command's
start-up.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

import anyio
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from anyio.from_thread import BlockingPortal, start_blocking_portal
from django.conf import settings
from pydantic import ValidationError

from tools.errors import ToolTimeout, ToolUnreachable
from tools.mcp.config import McpServer
from tools.redaction import Redactor
from tools.secrets import register_server_secrets
from tools.templating import render, render_text

if TYPE_CHECKING:
    import mcp_types as types
    from mcp import Client

_STDERR_TAIL = 600
_JUNK_SHOWN = 120
logger = logging.getLogger("flowpilot.tools.mcp")
T = TypeVar("T")


class McpSessions:
    """One run's connected MCP clients, keyed by server name. Close it when done."""

    def __init__(self, *, env: Mapping[str, str], redactor: Redactor) -> None:
        self._env = env
        self._redactor = redactor
        self._lock = threading.Lock()
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None
        self._clients: dict[str, tuple[McpServer, Client, ExitStack]] = {}
        self._junk: dict[str, list[str]] = {}

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

    def run(self, server: McpServer, call: Callable[[Client], Awaitable[T]], *, within: float) -> T:
        """``await call(client)`` on the server's connected client, from this thread.

        Raises ``ToolTimeout`` when it has not finished ``within`` seconds (the task is
        cancelled and the session discarded: its state is unknown)."""
        portal, client = self._client(server)
        future = portal.start_task_soon(call, client)
        try:
            return future.result(timeout=within)
        except FutureTimeout:
            future.cancel()
            self.discard(server)
            raise ToolTimeout(
                f"MCP server {server.name!r} did not answer within {within:g}s"
            ) from None

    def stdout_junk(self, server: McpServer) -> str | None:
        """The first line of the server's stdout that was not JSON-RPC (its session
        was closed there), if one was seen since the session was opened."""
        junk = self._junk.get(server.name)
        return junk[0] if junk else None

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
            junk: list[str] = []
            self._junk[server.name] = junk
            held = _Held(self._portal, _connected(server, self._env, errlog, junk))
            try:
                client = held.enter(within=settings.FLOWPILOT_MCP_START_TIMEOUT)
            except Exception as exc:  # any failure to start or initialize the session
                error = self._unreachable(server, exc, errlog, junk)
                stack.close()
                raise error from exc
            stack.callback(held.leave, within=settings.FLOWPILOT_MCP_SHUTDOWN_TIMEOUT)
            self._clients[server.name] = (server, client, stack)
            return self._portal, client

    def _unreachable(
        self, server: McpServer, exc: BaseException, errlog: TextIO, junk: list[str]
    ) -> Exception:
        errlog.seek(0)
        tail = errlog.read()[-_STDERR_TAIL:].strip()
        if isinstance(exc, _StartTimeout):
            detail = (
                f"no answer to initialize within {settings.FLOWPILOT_MCP_START_TIMEOUT:g}s "
                "(FLOWPILOT_MCP_START_TIMEOUT)"
            )
        else:
            detail = f"{type(exc).__name__}: {_describe(exc)}"
        if junk:
            detail = f"its stdout is not JSON-RPC: {junk[0]}"
        if tail:
            detail += f"; its stderr ends: {tail}"
        message = f"MCP server {server.name!r} could not be reached ({server.transport}): {detail}"
        return ToolUnreachable(self._redactor.scrub_text(message))


class _StartTimeout(Exception):
    """The session was not started and initialized within its deadline."""


class _Held:
    """An async context manager entered and held open by a task of the portal's loop,
    with a deadline on entering and one on leaving, kept from this (sync) side."""

    def __init__(self, portal: BlockingPortal, manager: AbstractAsyncContextManager[Any]) -> None:
        self._portal = portal
        self._manager = manager
        self._entered: Future[tuple[Any, anyio.Event]] = Future()
        self._task = portal.start_task_soon(self._hold)

    async def _hold(self) -> None:
        leave = anyio.Event()
        async with self._manager as value:
            self._entered.set_result((value, leave))
            await leave.wait()

    def enter(self, *, within: float) -> Any:
        """The entered value; raises what entering raised, or ``_StartTimeout`` past
        ``within`` seconds (the task is cancelled: a stdio process is stopped)."""
        pending: list[Future[Any]] = [self._entered, self._task]
        wait(pending, timeout=within, return_when=FIRST_COMPLETED)
        if self._entered.done():
            return self._entered.result()[0]
        if self._task.done():
            self._task.result()  # raises what entering raised
            raise RuntimeError("the session ended before it was initialized")
        self._task.cancel()
        wait([self._task], timeout=settings.FLOWPILOT_MCP_SHUTDOWN_TIMEOUT)
        raise _StartTimeout

    def leave(self, *, within: float) -> None:
        """Exit the context manager; past ``within`` seconds its task is cancelled."""
        if self._task.done():
            return
        leave = self._entered.result()[1]
        self._portal.call(leave.set)
        try:
            self._task.result(timeout=within)
        except FutureTimeout:
            logger.warning("a session did not close within %gs; it is cancelled", within)
            self._task.cancel()


def _describe(exc: BaseException) -> str:
    """The innermost messages of an exception (group), joined."""
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in exc.exceptions)
    return str(exc) or type(exc).__name__


@asynccontextmanager
async def _connected(
    server: McpServer, env: Mapping[str, str], errlog: TextIO, junk: list[str]
) -> AsyncIterator[Client]:
    """An initialized client of ``server``, its templates rendered with ``env``; a stdio
    server's first line of stdout that is not JSON-RPC is added to ``junk``."""
    from mcp import Client  # the SDK, on the connecting path only (module docstring)
    from mcp.client.stdio import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    if server.command is not None:
        params = StdioServerParameters(
            command=render_text(server.command, {}, env=env),
            args=[render_text(a, {}, env=env) for a in server.args],
            env={k: render_text(v, {}, env=env) for k, v in sorted(server.env.items())},
        )
        transport: Any = _protocol_only(stdio_client(params, errlog=errlog), server, junk)
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


@asynccontextmanager
async def _protocol_only(
    transport: AbstractAsyncContextManager[tuple[Any, Any]], server: McpServer, junk: list[str]
) -> AsyncIterator[tuple[Any, Any]]:
    """``transport``'s streams, ended at the first line that is not a JSON-RPC message.

    The SDK hands such a line to the session as an exception (and logs it) and goes
    on reading; a server flooding its stdout would log a traceback per line. Here the
    first one ends the read stream instead: the session sees the connection close,
    its pending request fails, and the SDK's reader only drains what is left."""
    async with transport as (read, write):
        sender, receiver = anyio.create_memory_object_stream[Any](0)
        async with anyio.create_task_group() as group:
            group.start_soon(_relay, read, sender, server, junk)
            try:
                yield receiver, write
            finally:
                group.cancel_scope.cancel()


async def _relay(
    read: ObjectReceiveStream[Any], sender: ObjectSendStream[Any], server: McpServer,
    junk: list[str],
) -> None:  # fmt: skip
    """Pass ``read``'s messages on to ``sender``; at the first item that is not a
    message (the SDK's parse error), note the line in ``junk`` and end both streams."""
    async with sender, read:
        async for item in read:
            if isinstance(item, Exception):
                errors = item.errors() if isinstance(item, ValidationError) else []
                shown = str(errors[0].get("input", item) if errors else item)[:_JUNK_SHOWN]
                junk.append(repr(shown))
                logger.warning(  # the line itself only in the (masked) error
                    "MCP server %s wrote a line on stdout that is not JSON-RPC; its session "
                    "is closed",
                    server.name,
                )
                return
            await sender.send(item)


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
