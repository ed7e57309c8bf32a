"""flowpilot's MCP server under test: the SDK's own client, over streamable HTTP (a live
server on loopback, in this process) and over stdio (``manage.py mcpserve`` spawned
against this session's test database)."""

from __future__ import annotations

import os
import socket
import sqlite3
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from rest_framework.authtoken.models import Token

from tests.api.conftest import grant
from tests.conftest import REPO_ROOT
from tests.factories import UserFactory
from tests.startup import start_deadline

Script = Callable[[Client], Awaitable[Any]]


def token_of(user) -> str:
    token, _ = Token.objects.get_or_create(user=user)
    return token.key


def agent(*perms: str, username: str = "agent"):
    """A user holding exactly ``perms`` (and so what the API would let them do)."""
    user = UserFactory(username=username, permissions=None)
    user.user_permissions.clear()
    return grant(user, *perms)


AGENT_PERMS = (
    "tools.view_tool",
    "workflows.view_workflow",
    "workflows.add_workflow",
    "runs.view_run",
    "runs.add_run",
)


def over_http(url: str, token: str | None, script: Script) -> Any:
    """Run ``script(client)`` in one MCP session over streamable HTTP."""

    async def main():
        headers = {"Authorization": f"Token {token}"} if token else {}
        async with create_mcp_http_client(headers=headers) as http:
            transport = streamable_http_client(url, http_client=http)
            async with Client(transport, mode="legacy", cache=None) as client:
                return await script(client)

    return anyio.run(main)


def over_stdio(env: dict[str, str], script: Script, *args: str) -> Any:
    """Run ``script(client)`` against a spawned ``manage.py mcpserve`` (stdio)."""

    async def main():
        params = StdioServerParameters(
            command=sys.executable,
            args=[str(REPO_ROOT / "manage.py"), "mcpserve", *args],
            env=env,
            cwd=str(REPO_ROOT),
        )
        async with Client(stdio_client(params), mode="legacy", cache=None) as client:
            return await script(client)

    return anyio.run(main)


def calls(*steps: tuple[str, dict]) -> Script:
    """A script calling each ``(tool, arguments)`` in turn; it returns every result."""

    async def script(client: Client):
        return [await client.call_tool(name, arguments) for name, arguments in steps]

    return script


@pytest.fixture
def mcp_http(transactional_db, settings):
    """The streamable-HTTP app (``api.mcp.server.http_app``) served by uvicorn on a
    loopback port in a thread of this process; yields its URL."""
    from api.mcp.server import http_app

    settings.FLOWPILOT_API_MAX_WAIT = 30.0
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(http_app(), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_deadline()  # a thread, but on the same busy CPUs
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.started, "the MCP server did not start"
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(10)


@pytest.fixture
def shared_database(transactional_db, tmp_path):
    """The URL of a database another process shares with this test.

    On PostgreSQL, this session's test database. On SQLite (in memory, invisible to
    other processes) a file: the test database is copied into it and this process's
    connection switched to it for the test, then switched back.
    """
    from django.db import connection

    if connection.vendor == "postgresql":
        from tests.celery_support import worker_database_url

        yield worker_database_url()
        return
    path = tmp_path / "shared.sqlite3"
    connection.ensure_connection()
    copy = sqlite3.connect(path)
    connection.connection.backup(copy)
    copy.close()
    in_memory, name = connection.connection, connection.settings_dict["NAME"]
    connection.connection = None
    connection.settings_dict["NAME"] = str(path)
    try:
        yield f"sqlite:///{path}"
    finally:
        connection.close()
        connection.settings_dict["NAME"] = name
        connection.connection = in_memory


@pytest.fixture
def stdio_env(shared_database, planner_llm, output_dir):
    """The environment of a spawned ``mcpserve``: the shared database, the fake LLM,
    this test's output directory, no broker (runs execute in the server process)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CELERY_BROKER_URL",)}
    env.update(
        DATABASE_URL=shared_database,
        OPENAI_BASE_URL=planner_llm.base_url,
        OPENAI_API_KEY="test-key",
        PLANNER_MODEL="fake-planner",
        FLOWPILOT_OUTPUT_DIR=str(output_dir),
    )
    env.pop("FLOWPILOT_MCP_TOKEN", None)
    return env
