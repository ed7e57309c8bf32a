"""Deadlines and misbehaving servers, with real stdio processes
(tests/data/mcp/misbehaving_server.py): a server that never answers ``initialize``,
one that answers it but never ``tools/list`` (and ignores SIGTERM), and ones that
flood stdout with junk. ``loadtools`` reports each file and goes on; a call fails
with one clear error; the processes are stopped; the log stays short."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import httpx
import pytest

from tools.calls import ToolCallContext
from tools.errors import ToolOutcomeUnknown, ToolUnreachable
from tools.mcp.calls import call_mcp_tool
from tools.mcp.config import McpServer, McpToolConfig
from tools.mcp.session import McpSessions
from tools.models import Tool
from tools.redaction import Redactor
from tools.spec import ToolSpec

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = Path(__file__).resolve().parents[2] / "data" / "mcp" / "misbehaving_server.py"
GOOD_TOOL = """
name: ping
description: A plain http tool, loaded whatever the MCP servers do.
base_url: https://example.com
request: {method: GET, url: /ping}
"""


@pytest.fixture
def short_deadlines(settings):
    settings.FLOWPILOT_MCP_START_TIMEOUT = 1.5
    settings.FLOWPILOT_MCP_LIST_TIMEOUT = 1.5
    settings.FLOWPILOT_MCP_SHUTDOWN_TIMEOUT = 5.0
    return settings


def _server_file(directory: Path, name: str, mode: str) -> Path:
    pid_file = directory / f"{name}.pid"
    path = directory / f"{name}.yaml"
    path.write_text(
        f"mcp_server:\n  name: {name}\n  command: {sys.executable}\n"
        f"  args: [{SCRIPT}, {mode}, {pid_file}]\n  timeout: 2\n",
        encoding="utf-8",
    )
    return pid_file


def _stopped(pid_file: Path) -> bool:
    pid = int(pid_file.read_text())
    for _ in range(50):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return True  # exited; its parent has not reaped it yet
        time.sleep(0.1)
    return False


def test_loadtools_reports_servers_that_never_answer_and_goes_on(cli, tmp_path, short_deadlines):
    silent = _server_file(tmp_path, "silent", "silent")
    no_list = _server_file(tmp_path, "nolist", "no_list")
    (tmp_path / "ping.yaml").write_text(GOOD_TOOL, encoding="utf-8")

    loaded = cli("loadtools", str(tmp_path), "--no-builtin")

    assert loaded.code == 1
    assert "created ping (http)" in loaded.out
    assert f"{tmp_path / 'silent.yaml'}" in loaded.err
    assert "MCP server 'silent' could not be reached (stdio): no answer to initialize " in (
        loaded.err
    )
    assert "within 1.5s (FLOWPILOT_MCP_START_TIMEOUT)" in loaded.err
    assert f"{tmp_path / 'nolist.yaml'}" in loaded.err
    assert (
        "MCP server 'nolist' did not answer within 1.5s listing its tools "
        "(FLOWPILOT_MCP_LIST_TIMEOUT)"
    ) in loaded.err
    assert list(Tool.objects.values_list("name", flat=True)) == ["ping"]
    assert _stopped(silent)
    assert _stopped(no_list)  # although it ignores SIGTERM


def test_a_step_calling_a_server_that_never_answers_initialize_fails_in_time(
    tmp_path, short_deadlines
):
    pid_file = _server_file(tmp_path, "silent", "silent")
    server = McpServer(
        name="silent", command=sys.executable, args=[str(SCRIPT), "silent", str(pid_file)]
    )
    spec = ToolSpec(name="silent_echo", kind="mcp", mcp=McpToolConfig(server=server, tool="echo"))
    ctx = ToolCallContext(env={}, redactor=Redactor(), http=httpx.Client(), timeout=2)

    with pytest.raises(ToolUnreachable) as failed:
        call_mcp_tool(spec, {}, ctx)

    assert "no answer to initialize within 1.5s" in failed.value.message
    assert failed.value.retryable is True
    assert _stopped(pid_file)


def _records_text(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(
        r.getMessage() + ("\n" + str(r.exc_text or "") if r.exc_info else "")
        for r in caplog.records
    )


def test_a_server_flooding_stdout_is_one_clear_error_not_a_log_flood(
    cli, tmp_path, short_deadlines, caplog
):
    pid_file = _server_file(tmp_path, "flood", "flood")
    caplog.set_level(logging.DEBUG)

    loaded = cli("loadtools", str(tmp_path), "--no-builtin")

    assert loaded.code == 1
    assert "MCP server 'flood' could not be reached (stdio): its stdout is not JSON-RPC: " in (
        loaded.err
    )
    assert "this is not JSON-RPC" in loaded.err
    assert len(caplog.records) <= 6, [r.getMessage() for r in caplog.records]
    assert _records_text(caplog).count("\n") < 200
    assert _stopped(pid_file)


def test_a_server_flooding_stdout_during_a_call_ends_the_call_and_the_session(
    tmp_path, short_deadlines, caplog
):
    pid_file = _server_file(tmp_path, "flooder", "flood_on_call")
    server = McpServer(
        name="flooder", command=sys.executable, args=[str(SCRIPT), "flood_on_call", str(pid_file)]
    )
    config = McpToolConfig(server=server, tool="echo")
    spec = ToolSpec(name="flooder_echo", kind="mcp", mcp=config, idempotent=False)
    caplog.set_level(logging.DEBUG)

    with McpSessions(env={}, redactor=Redactor()) as sessions:
        ctx = ToolCallContext(env={}, redactor=Redactor(), http=httpx.Client(), mcp=sessions)
        with pytest.raises(ToolOutcomeUnknown) as failed:
            call_mcp_tool(spec, {}, ctx)

    assert (
        "tool 'flooder_echo' (MCP server 'flooder') wrote on stdout what is not JSON-RPC "
        "('this is not JSON-RPC" in failed.value.message
    )
    assert "and: the connection closed" in failed.value.message
    assert "may have acted" in failed.value.message
    assert len(caplog.records) <= 6, [r.getMessage() for r in caplog.records]
    assert "wrote a line on stdout that is not JSON-RPC" in caplog.text
    assert _stopped(pid_file)
