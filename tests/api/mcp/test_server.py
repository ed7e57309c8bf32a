"""The pieces of the MCP server around the tools: the command's refusals, the HTTP
transport's host checks, a crash answered without its text, and ``mcpserve --transport
http`` as a real process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from api.mcp import handlers, server
from tests.api.mcp.conftest import agent, calls, over_http, token_of
from tests.conftest import REPO_ROOT
from tests.startup import start_deadline

# Its subject is not the database: the PostgreSQL pass leaves it to the SQLite pass.
pytestmark = pytest.mark.one_database


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "refused: an API token is needed"),
        (("--token", "nope"), "refused: Invalid token."),
        (("--transport", "http", "--token", "x"), "--token is for stdio"),
        (("--transport", "http", "--port", "0"), "--port must be 1 to 65535, not 0"),
    ],
)
def test_the_command_refuses_what_it_cannot_serve(cli, db, monkeypatch, args, message):
    monkeypatch.delenv("FLOWPILOT_MCP_TOKEN", raising=False)

    result = cli("mcpserve", *args)

    assert result.code == 1
    assert message in result.err


def test_on_loopback_the_sdk_guards_the_host_elsewhere_the_allowed_hosts(settings):
    settings.ALLOWED_HOSTS = ["flow.example.com"]

    assert server.transport_security("127.0.0.1") is None
    guarded = server.transport_security("0.0.0.0")
    assert guarded.enable_dns_rebinding_protection
    assert guarded.allowed_hosts == ["flow.example.com", "flow.example.com:*"]
    assert "https://flow.example.com" in guarded.allowed_origins
    settings.ALLOWED_HOSTS = ["*"]
    assert not server.transport_security("0.0.0.0").enable_dns_rebinding_protection


def test_a_crash_is_answered_as_internal_error_without_its_text(mcp_http, monkeypatch, caplog):
    def broken(**kwargs):
        raise RuntimeError("secret internals")

    broken.__name__ = "list_tools"
    monkeypatch.setattr(handlers, "list_tools", broken)
    token = token_of(agent("tools.view_tool"))

    (result,) = over_http(mcp_http, token, calls(("list_tools", {})))

    assert result.is_error
    assert result.structured_content["code"] == "internal_error"
    assert "secret internals" not in result.content[0].text
    assert "MCP tool list_tools failed" in caplog.text


@pytest.mark.slow
def test_mcpserve_over_http_as_a_process(shared_database):
    token = token_of(agent("workflows.view_workflow"))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {"DATABASE_URL": shared_database, "PATH": "/usr/bin:/bin"}
    args = ["mcpserve", "--transport", "http", "--port", str(port), "--path", "/agents"]
    process = subprocess.Popen(
        [sys.executable, str(REPO_ROOT / "manage.py"), *args],
        env=env,
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_for_port(port, process)
        url = f"http://127.0.0.1:{port}/agents"
        (listed,) = over_http(url, token, calls(("list_workflows", {})))
        assert listed.structured_content == {"workflows": [], "truncated": False}
    finally:
        process.terminate()
        out, _ = process.communicate(timeout=start_deadline())
    assert f"flowpilot MCP server on http://127.0.0.1:{port}/agents" in out.decode()


def _wait_for_port(port: int, process: subprocess.Popen) -> None:
    limit = start_deadline()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stdout.read().decode()
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise AssertionError(f"mcpserve --transport http did not listen within {limit:.0f} s")
