"""MCP client tools: a real stdio server from PyPI (mcp-server-time) and a
streamable-HTTP server written with the SDK, registered with ``loadtools``, listed,
refreshed and called — from the registry and from a workflow step (``runflow``)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx
import pytest

from runs.models import Run
from tests.fakes.mcp_server import TOKEN
from tests.tools.conftest import MCP_SERVER_FILE
from tools.calls import ToolCallContext
from tools.errors import (
    ToolCallFailed,
    ToolInputError,
    ToolOutcomeUnknown,
    ToolTimeout,
    ToolUnreachable,
)
from tools.mcp.discovery import mcp_tool_name
from tools.mcp.session import McpSessions
from tools.models import Tool
from tools.redaction import Redactor
from tools.registry import ToolRegistry

pytestmark = pytest.mark.django_db(transaction=True)

TIME_SERVER = f"""
mcp_server:
  name: time
  description: Current time and time-zone conversion (mcp-server-time).
  command: {sys.executable}
  args: [-m, mcp_server_time, --local-timezone, UTC]
  timeout: 20
"""

HTTP_SERVER = MCP_SERVER_FILE  # the loopback server of ``mcp_fake``


@pytest.fixture
def fake(mcp_fake):
    return mcp_fake


def _write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _context(redactor: Redactor, sessions: McpSessions | None, **extra) -> ToolCallContext:
    return ToolCallContext(
        env=dict(os.environ), redactor=redactor, http=httpx.Client(), mcp=sessions, **extra
    )


def test_the_time_server_over_stdio_is_listed_and_called_from_a_workflow_step(
    cli, tmp_path, output_dir
):
    tools = tmp_path / "tools"
    tools.mkdir()
    _write(tools, "time.yaml", TIME_SERVER)
    loaded = cli("loadtools", str(tools), "--no-builtin")
    assert loaded.code == 0, loaded.out + loaded.err
    assert "created time_get_current_time (mcp)" in loaded.out
    assert "created time_convert_time (mcp)" in loaded.out
    row = Tool.objects.get(name="time_get_current_time")
    assert row.kind == "mcp"
    assert row.outputs == ["datetime", "day_of_week", "is_dst", "timezone"]
    # The properties' schemas of the server's outputSchema are the outputs' types.
    assert row.spec["output_types"]["is_dst"]["type"] == "boolean"
    assert row.spec["output_types"]["timezone"]["type"] == "string"
    assert row.input_schema["required"] == ["timezone"]
    assert row.spec["idempotent"] is True  # from idempotentHint

    flow = _write(
        tmp_path,
        "flow.yaml",
        """
name: paris_time
description: What time is it in Paris, and then in Tokyo?
inputs: {zone: {type: string, default: Europe/Paris}}
tools: [time_get_current_time, time_convert_time]
steps:
  - id: now
    kind: tool
    tool: time_get_current_time
    input_mapping: {timezone: $input.zone}
  - id: tokyo
    kind: tool
    tool: time_convert_time
    input_mapping: {source_timezone: now.timezone, time: "12:00", target_timezone: Asia/Tokyo}
outputs: {zone: now.timezone, weekday: now.day_of_week, tokyo: tokyo.target.timezone}
""",
    )
    result = cli("runflow", str(flow))
    assert result.code == 0, result.out + result.err
    run = Run.objects.get()
    assert run.status == "succeeded"
    assert run.outputs["zone"] == "Europe/Paris"
    assert run.outputs["tokyo"] == "Asia/Tokyo"
    assert run.outputs["weekday"] in {
        "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"
    }  # fmt: skip


def test_an_error_result_of_the_stdio_server_is_a_fatal_tool_call_failed(cli, tmp_path):
    _write(tmp_path, "time.yaml", TIME_SERVER)
    assert cli("loadtools", str(tmp_path), "--no-builtin").code == 0
    registry = ToolRegistry.from_db(providers=[])
    with McpSessions(env=os.environ, redactor=Redactor()) as sessions:
        ctx = _context(Redactor(), sessions)
        ok = registry.call("time_get_current_time", {"timezone": "UTC"}, ctx)
        assert ok.output["timezone"] == "UTC"
        with pytest.raises(ToolCallFailed) as failed:
            registry.call("time_get_current_time", {"timezone": "Nowhere/Else"}, ctx)
    assert "Invalid timezone" in failed.value.message
    assert "time_get_current_time" in failed.value.message
    assert failed.value.retryable is False


def test_http_server_tools_results_errors_timeouts_and_redaction(cli, tmp_path, fake):
    _write(tmp_path, "fake.yaml", HTTP_SERVER)
    loaded = cli("loadtools", str(tmp_path), "--no-builtin")
    assert loaded.code == 0, loaded.out + loaded.err
    names = sorted(Tool.objects.filter(kind="mcp").values_list("name", flat=True))
    assert names == ["fake_add", "fake_boom", "fake_evolving", "fake_shout", "fake_slow"]
    assert TOKEN not in str(Tool.objects.get(name="fake_add").spec)  # templates only
    registry = ToolRegistry.from_db(providers=[])
    redactor = Redactor()
    with McpSessions(env=os.environ, redactor=redactor) as sessions:
        ctx = _context(redactor, sessions)
        assert registry.call("fake_add", {"a": 2, "b": 3}, ctx).output == {"sum": 5}
        assert registry.call("fake_shout", {"text": "hi"}, ctx).output == {"text": "HI"}
        with pytest.raises(ToolCallFailed) as boom:
            registry.call("fake_boom", {}, ctx)
        assert "the backend refused token ***" in boom.value.message
        assert TOKEN not in boom.value.message
        with pytest.raises(ToolTimeout) as slow:
            registry.call("fake_slow", {"seconds": 3}, _context(redactor, sessions, timeout=0.5))
        assert slow.value.retryable is True
        assert "did not answer within 0.5s" in slow.value.message
        # the session survives a timeout: the next call goes through it
        assert registry.call("fake_add", {"a": 1, "b": 1}, ctx).output == {"sum": 2}
    assert fake.calls.count("add") == 2


def test_a_timeout_of_a_tool_that_is_not_idempotent_is_outcome_unknown(tmp_path, fake):
    from tools.mcp.config import McpServer
    from tools.mcp.discovery import mcp_server_specs

    server = McpServer.model_validate(
        {"name": "fake", "url": fake.url, "headers": {"X-Token": TOKEN}, "idempotent": False}
    )
    specs = {s.name: s for s in mcp_server_specs(server=server, env={})}
    registry = ToolRegistry(specs.values())
    with McpSessions(env={}, redactor=Redactor()) as sessions:
        ctx = _context(Redactor(), sessions, timeout=0.3)
        with pytest.raises(ToolOutcomeUnknown) as unknown:
            registry.call("fake_slow", {"seconds": 2}, ctx)
    assert "may have acted" in unknown.value.message


def test_a_refresh_records_added_changed_and_removed_tools(cli, tmp_path, fake):
    _write(tmp_path, "fake.yaml", HTTP_SERVER)
    assert cli("loadtools", str(tmp_path), "--no-builtin").code == 0
    before = Tool.objects.get(name="fake_evolving").input_schema
    assert before["required"] == ["city"]
    fake.change_schema()
    refreshed = cli("loadtools", str(tmp_path), "--no-builtin")
    assert refreshed.code == 0, refreshed.err
    assert "updated fake_evolving (mcp)" in refreshed.out
    assert "removed fake_shout (mcp)" in refreshed.out
    assert "unchanged fake_add (mcp)" in refreshed.out
    assert Tool.objects.get(name="fake_evolving").input_schema["required"] == ["city", "country"]
    assert not Tool.objects.filter(name="fake_shout").exists()


def test_an_unreachable_or_refusing_server_is_an_error_naming_it(cli, tmp_path, fake, monkeypatch):
    _write(tmp_path, "fake.yaml", HTTP_SERVER)
    monkeypatch.setenv("FAKE_MCP_TOKEN", "wrong-token-5678")
    loaded = cli("loadtools", str(tmp_path), "--no-builtin")
    assert loaded.code == 1
    assert "MCP server 'fake' could not be reached (http)" in loaded.err
    assert "wrong-token-5678" not in loaded.err  # a declared secret header is masked

    missing = McpSessions(env={}, redactor=Redactor())
    from tools.mcp.config import McpServer

    server = McpServer(name="ghost", command=sys.executable, args=["-c", "import sys; sys.exit(3)"])
    with missing, pytest.raises(ToolUnreachable) as gone:
        missing.run(server, lambda client: client.list_tools(), within=10)
    assert gone.value.retryable is True
    assert "'ghost' could not be reached (stdio)" in gone.value.message


def test_a_call_the_server_refuses_is_a_fatal_input_error(tmp_path):
    from tools.mcp.config import McpServer, McpToolConfig
    from tools.spec import ToolSpec

    server = McpServer(name="time", command=sys.executable, args=["-m", "mcp_server_time"])
    # a spec for a tool the server does not have: it answers JSON-RPC -32602
    spec = ToolSpec(name="time_gone", kind="mcp", mcp=McpToolConfig(server=server, tool="gone"))
    with pytest.raises(ToolInputError) as refused:
        ToolRegistry([spec]).call("time_gone", {}, _context(Redactor(), None))
    assert "tool 'time_gone' (MCP server 'time') refused the call: Unknown tool: gone" in (
        refused.value.message
    )
    assert refused.value.retryable is False


def test_bad_server_files_are_reported_with_file_line_and_field(cli, tmp_path):
    _write(
        tmp_path,
        "bad.yaml",
        """mcp_server:
  name: "bad name"
  command: run
  url: http://127.0.0.1:1/mcp
  headers: {X: "{{token}}"}
  secret_headers: [Y]
""",
    )
    loaded = cli("loadtools", str(tmp_path), "--no-builtin")
    assert loaded.code == 1
    assert "bad.yaml:2: field mcp_server.name: String should match pattern" in loaded.err
    assert "bad.yaml:5: field mcp_server.headers: headers may only use {{env.NAME}}" in loaded.err


def test_tool_names_are_prefixed_and_fit_the_pattern():
    assert mcp_tool_name("time", "get_current_time") == "time_get_current_time"
    assert mcp_tool_name("gh", "repos.get") == "gh_repos_get"
    assert len(mcp_tool_name("s", "x" * 100)) == 64


def test_a_stdio_servers_secret_env_is_passed_and_masked(tmp_path, monkeypatch):
    """The child gets the rendered env; a declared secret is masked in what is shown."""
    from tools.mcp.config import McpServer
    from tools.mcp.discovery import mcp_server_specs

    script = tmp_path / "echo_env.py"
    script.write_text(
        "import os\n"
        "from mcp.server.mcpserver import MCPServer\n"
        "from mcp.server.mcpserver.exceptions import ToolError\n"
        "server = MCPServer('envy')\n"
        "@server.tool()\n"
        "def leak() -> str:\n"
        "    raise ToolError('the key is ' + os.environ['API_KEY'])\n"
        "server.run('stdio')\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("ENVY_KEY", "envy-secret-value-42")
    server = McpServer(
        name="envy",
        command=sys.executable,
        args=[str(script)],
        env={"API_KEY": "{{env.ENVY_KEY}}"},
        secret_env=["ENVY_KEY"],
    )
    [spec] = mcp_server_specs(server=server, env=os.environ)
    assert spec.secret_env_names() == frozenset({"ENVY_KEY"})
    assert "envy-secret-value-42" not in str(spec.stored())
    redactor = Redactor()
    sessions = McpSessions(env=os.environ, redactor=redactor)
    with sessions, pytest.raises(ToolCallFailed) as leaked:
        ToolRegistry([spec]).call("envy_leak", {}, _context(redactor, sessions))
    assert leaked.value.message.endswith("the key is ***")
    assert "envy-secret-value-42" not in leaked.value.message
