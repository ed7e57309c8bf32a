"""Recording MCP tool calls and LLM calls in a validation run, and replaying them offline.

The validation run calls a real streamable-HTTP MCP server (``tests/fakes/mcp_server``),
the real ``mcp-server-time`` over stdio, and the loopback OpenAI-compatible fake for an
``llm`` step (which calls an MCP tool from the model) and an LLM decision. The replays
run with the MCP server stopped, the stdio server's command pointing nowhere and the
LLM settings pointing at a port nothing listens on: any call that tried to go out
would fail its step.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import pytest
from mcp.shared.exceptions import MCPError

from review.services import workflow_approve
from runs.models import RecordingKind, Run, ToolCallRecording
from runs.replay.player import RecordedCalls, RecordedSessionFailure, _key_of, _Recorded
from runs.replay.recorder import CallRecorder
from runs.replay.services import version_replay
from tests.conftest import results_of
from tests.fakes.mcp_server import TOKEN, running_mcp_fake
from tests.fakes.openai_server import tool_call
from tools.errors import ToolUnreachable
from tools.jsondata import store_unescape
from tools.llm.endpoints import PUBLIC_BASE_URL
from tools.redaction import Redactor
from tools.services import tools_load_dir
from workflows.models import WorkflowStatus
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db(transaction=True)

SERVERS = {
    "fake.yaml": """
mcp_server:
  name: fake
  url: "{{env.FAKE_MCP_URL}}"
  headers: {X-Token: "{{env.FAKE_MCP_TOKEN}}"}
  secret_headers: [X-Token]
  timeout: 5
  retry: {max_attempts: 1}
""",
    "time.yaml": """
mcp_server:
  name: time
  description: Current time (mcp-server-time).
  command: "{{env.TIME_SERVER_PYTHON}}"
  args: [-m, mcp_server_time, --local-timezone, UTC]
  timeout: 20
""",
}

FLOW = {
    "name": "mcp_llm_ops",
    "inputs": {"a": {"type": "integer", "default": 2}},
    "tools": ["fake_add", "time_get_current_time"],
    "steps": [
        {"id": "sum", "kind": "tool", "tool": "fake_add",
         "input_mapping": {"a": "$input.a", "b": 3}},
        {"id": "clock", "kind": "tool", "tool": "time_get_current_time",
         "input_mapping": {"timezone": "Europe/Paris"}},
        {"id": "ask", "kind": "llm", "tools": ["fake_add"],
         "prompt": "Add {{x}} and 10 with the tool, then say the total.",
         "input_mapping": {"x": "sum.sum"}},
        {"id": "route", "kind": "decision", "branches": ["large", "small"],
         "decision_prompt": "The answer was: {{said}}. Large or small?",
         "input_mapping": {"said": "ask.result"}},
        {"id": "big", "kind": "transform", "expression": "{size: 'large', zone: zone}",
         "input_mapping": {"zone": "clock.timezone"}},
        {"id": "little", "kind": "transform", "expression": "{size: 'small'}",
         "input_mapping": {"zone": "clock.timezone"}},
    ],
    "edges": [
        {"from": "route", "to": "big", "when": "large"},
        {"from": "route", "to": "little", "when": "small"},
    ],
}  # fmt: skip
STEPS = 6


@pytest.fixture
def validated(tmp_path, monkeypatch, planner_llm, approver, settings):
    """FLOW approved against the live MCP servers and the fake LLM; then all of them
    are made unreachable."""
    for name, text in SERVERS.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.setenv("TIME_SERVER_PYTHON", sys.executable)
    with running_mcp_fake() as mcp:
        monkeypatch.setenv("FAKE_MCP_URL", mcp.url)
        monkeypatch.setenv("FAKE_MCP_TOKEN", TOKEN)
        report = tools_load_dir(directory=tmp_path)
        assert report.ok, report.errors
        version, _ = workflow_import(data=FLOW, status=WorkflowStatus.PENDING_REVIEW)
        planner_llm.reply(tool_calls=[tool_call("fake_add", {"a": 5, "b": 10}, call_id="c1")])
        planner_llm.reply("The total is 15.")
        planner_llm.reply_json({"branch": "large", "reason": "15 is large"})
        approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})
        assert approval.status == "passed", approval.validation_run.error_summary
        mcp_calls = list(mcp.calls)
    assert mcp_calls == ["add", "add"]  # the `sum` step, and the model's call in `ask`
    planner_llm.stop()
    llm_requests = len(planner_llm.requests)
    settings.OPENAI_BASE_URL = "http://127.0.0.1:9/v1"  # nothing listens there
    settings.PLANNER_MODEL = "another-model"  # the step names none: not compared
    monkeypatch.setenv("TIME_SERVER_PYTHON", str(tmp_path / "no-such-python"))
    return SimpleNamespace(
        run=approval.validation_run, mcp=mcp, llm=planner_llm, llm_requests=llm_requests
    )


def rows(run: Run, step_id: str) -> list[ToolCallRecording]:
    return list(
        ToolCallRecording.objects.filter(step_result__run=run, step_result__step_id=step_id)
    )


def test_the_validation_run_records_mcp_and_llm_calls_masked(validated):
    [added] = rows(validated.run, "sum")
    assert (added.kind, added.tool, added.method, added.url) == (
        RecordingKind.MCP, "fake_add", "tools/call", "mcp:fake/add"
    )  # fmt: skip
    assert added.request == {"server": "fake", "tool": "add", "arguments": {"a": 2, "b": 3}}
    assert added.response["structuredContent"] == {"sum": 5}
    assert len(added.request_hash) == 64
    [clock] = rows(validated.run, "clock")
    assert clock.request["tool"] == "get_current_time"
    assert clock.response["structuredContent"]["timezone"] == "Europe/Paris"

    first, model_call, second = rows(validated.run, "ask")
    assert [(r.kind, r.item) for r in (first, model_call, second)] == [
        ("llm", None), ("mcp", 1), ("llm", None)
    ]  # fmt: skip
    assert (first.tool, first.method, first.url) == ("default", "chat", "llm:default/fake-planner")
    assert first.request["model"] is None  # the endpoint's default: not part of the request
    assert first.request["endpoint"] == "default"
    assert first.request["messages"][1]["content"] == (
        "Add 5 and 10 with the tool, then say the total."
    )
    assert first.request["tools"][0]["function"]["name"] == "fake_add"
    assert first.response["tool_calls"] == [
        {"id": "c1", "name": "fake_add", "arguments": '{"a": 5, "b": 10}'}
    ]
    assert first.response["finish_reason"] == "tool_calls"
    assert first.response["usage"]["total_tokens"] == 15
    assert [a["status"] for a in first.response["attempts"]] == [200]
    assert model_call.request["arguments"] == {"a": 5, "b": 10}
    assert second.response["content"] == "The total is 15."
    assert second.request["messages"][-1]["role"] == "tool"
    [decision] = rows(validated.run, "route")
    assert decision.request["response_format"]["json_schema"]["name"] == "decision"
    stored = json.dumps(list(ToolCallRecording.objects.values()), default=str)
    assert TOKEN not in stored  # the MCP server's secret header
    assert "test-key" not in stored  # the LLM key is never part of a recording


def test_replay_with_no_mcp_server_and_no_llm_endpoint_matches_every_step(validated, cli):
    result = cli("replayflow", "mcp_llm_ops")

    assert result.code == 0, result.out + result.err
    replay = Run.objects.get(trigger="replay")
    assert result.lines[-1] == (
        f"replay run {replay.pk} of mcp_llm_ops v1 against validation run "
        f"{validated.run.pk}: all {STEPS} steps match"
    )
    assert replay.outputs == validated.run.outputs
    replayed = results_of(replay)
    assert replayed["ask"].output["result"] == "The total is 15."
    assert replayed["route"].output["branch"] == "large"
    assert replayed["little"].status == "skipped"
    assert validated.mcp.calls == ["add", "add"]  # the stopped server was not asked again
    assert len(validated.llm.requests) == validated.llm_requests
    assert not ToolCallRecording.objects.filter(step_result__run=replay).exists()


def test_a_replay_needs_no_configured_llm_endpoint_it_sends_nothing(validated, settings):
    """No key on the public default endpoint means no client for a run that would send,
    but a replay answers every model call from the recordings, so it runs without one."""
    settings.OPENAI_BASE_URL = PUBLIC_BASE_URL
    settings.OPENAI_API_KEY = ""

    report = version_replay(version=validated.run.workflow, validation_run=validated.run)

    assert report.matched, report.as_dict()
    assert results_of(report.replay_run)["ask"].output["result"] == "The total is 15."
    assert len(validated.llm.requests) == validated.llm_requests


def test_an_edited_llm_reply_is_named_in_the_report(validated):
    reply = rows(validated.run, "ask")[2]
    ToolCallRecording.objects.filter(pk=reply.pk).update(
        response={**reply.response, "content": "The total is 16."}
    )

    report = version_replay(version=validated.run.workflow)

    steps = {s.step_id: s for s in report.steps}
    assert steps["ask"].verdict == "differs"
    assert 'output.result: "The total is 15." → "The total is 16."' in steps["ask"].differences
    route = steps["route"].differences
    assert "status: succeeded in the validation run, failed in the replay" in route
    [error] = [line for line in route if line.startswith("error (replay_unrecorded)")]
    assert "step `route`: request differs — recorded LLM chat on `default`" in error
    assert "The answer was: The total is 15." in error  # what was recorded …
    assert "The answer was: The total is 16." in error  # … and what the replay sent
    assert "where they differ: request.messages.1.content:" in error
    assert "not sent (replays never use the network)" in error
    assert steps["sum"].verdict == steps["clock"].verdict == "matched"
    assert len(validated.llm.requests) == validated.llm_requests


def test_an_edited_mcp_result_changes_the_model_request_named_both_ways(validated, cli):
    added = rows(validated.run, "sum")[0]
    response = {**added.response, "structuredContent": {"sum": 6}}
    ToolCallRecording.objects.filter(pk=added.pk).update(response=response)

    result = cli("replayflow", "mcp_llm_ops")

    assert result.code == 1
    text = result.out
    assert "  differs  sum\n             output.sum: 5 → 6\n" in text
    assert "  differs  ask" in text
    assert "error (replay_unrecorded): step `ask`: request differs" in text
    assert (
        'where they differ: request.messages.1.content: "Add 5 and 10 with the tool, then say '
        'the total." → "Add 6 and 10 with the tool, then say the total."'
    ) in text
    assert "  matched  clock" in text


def test_a_model_call_the_validation_run_never_made_is_refused(validated):
    ToolCallRecording.objects.filter(
        step_result__run=validated.run, step_result__step_id="route"
    ).delete()

    report = version_replay(version=validated.run.workflow)

    route = next(s for s in report.steps if s.step_id == "route")
    assert any(
        "step `route` sent LLM chat on `default`" in line
        and "recorded no further LLM call of this step" in line
        for line in route.differences
    ), route.differences


def test_a_recorded_reply_cut_at_the_cap_cannot_be_replayed(validated):
    ToolCallRecording.objects.filter(
        step_result__run=validated.run, step_result__step_id="clock"
    ).update(body_truncated=True)

    report = version_replay(version=validated.run.workflow)

    clock = next(s for s in report.steps if s.step_id == "clock")
    assert any("replay_incomplete" in line for line in clock.differences)


def test_the_validation_runs_page_lists_its_recorded_calls_by_kind(validated, admin_client):
    page = admin_client.get(f"/admin/runs/run/{validated.run.pk}/change/").content.decode()

    assert "recorded calls (3): what a replay answers from" in page  # the `ask` step
    assert (
        '<tr data-kind="mcp"><td>mcp</td><td><code>tools/call mcp:fake/add</code></td>'
        "<td>result</td>"
    ) in page
    assert "<code>tools/call mcp:fake/add</code> · item 1</td>" in page  # the model's call
    assert (
        '<tr data-kind="llm"><td>llm</td><td><code>chat llm:default/fake-planner</code></td>'
        "<td>reply (tool_calls, 1 tool call)</td>"
    ) in page
    assert "<td>reply (stop)</td>" in page


# --- errors recorded, and raised again in the replay ----------------------------------


ERRORS_FLOW = {
    "name": "mcp_llm_errors",
    "steps": [
        {"id": "boom", "kind": "tool", "tool": "fake_boom", "on_error": "continue"},
        {"id": "ask", "kind": "llm", "prompt": "Say hi.", "tools": [], "on_error": "continue"},
    ],
}


def test_a_recorded_mcp_error_and_llm_error_are_raised_again(
    tmp_path, monkeypatch, planner_llm, approver
):
    (tmp_path / "fake.yaml").write_text(SERVERS["fake.yaml"], encoding="utf-8")
    with running_mcp_fake() as mcp:
        monkeypatch.setenv("FAKE_MCP_URL", mcp.url)
        monkeypatch.setenv("FAKE_MCP_TOKEN", TOKEN)
        assert tools_load_dir(directory=tmp_path).ok
        version, _ = workflow_import(data=ERRORS_FLOW, status=WorkflowStatus.PENDING_REVIEW)
        planner_llm.fail(401, message="bad key")
        approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})
    assert approval.status == "passed"  # on_error: continue
    validation = results_of(approval.validation_run)
    [boom] = rows(approval.validation_run, "boom")
    assert boom.error is None  # the server answered: an error *result*
    assert boom.response["isError"] is True
    assert "***" in json.dumps(boom.response)
    assert TOKEN not in json.dumps(boom.response)  # the server quoted its token: masked
    assert validation["boom"].error["type"] == "tool_call_failed"
    [ask] = rows(approval.validation_run, "ask")
    assert (ask.error["type"], ask.status) == ("llm_auth_failed", 401)
    planner_llm.stop()

    report = version_replay(version=version)

    assert report.matched, report.as_dict()
    replayed = results_of(report.replay_run)
    assert replayed["boom"].error == validation["boom"].error
    assert replayed["ask"].error == validation["ask"].error


# --- what is refused, what is never touched --------------------------------------------


def test_a_replay_writes_no_file_and_announces_nothing(output_dir, approver, settings):
    flow = {
        "name": "writes_ops",
        "steps": [{"id": "save", "kind": "tool", "tool": "write_json",
                   "input_mapping": {"path": "kept.json", "data": {"n": 1}}}],
    }  # fmt: skip
    version, _ = workflow_import(data=flow, status=WorkflowStatus.PENDING_REVIEW)
    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})
    assert approval.status == "passed"
    written = output_dir / "kept.json"
    written.unlink()
    settings.FLOWPILOT_RUN_FINISHED_HOOKS = ["tests.runs.test_replay_calls.heard"]
    HEARD.clear()

    report = version_replay(version=version)

    assert report.matched, report.as_dict()
    assert results_of(report.replay_run)["save"].output["path"] == str(written)
    assert not written.exists()
    assert HEARD == []  # the replay run announced nothing


HEARD: list[int] = []


def heard(*, run_id: int) -> None:
    """A run-finished hook that only remembers which runs it heard of."""
    HEARD.append(run_id)


def test_the_recorder_keeps_an_over_cap_request_as_a_preview(db):
    recorder = CallRecorder(run_id=0, max_bytes=16)

    preview, cut = recorder.capped_json({"messages": ["x" * 40]})

    assert cut is True
    assert preview == {"preview": '{"messages": ["x', "truncated": True}


@pytest.mark.parametrize(
    ("raised", "again"),
    [
        (MCPError(-32602, "bad arguments"), MCPError),
        (RuntimeError("pipe closed"), RecordedSessionFailure),
        (ToolUnreachable("MCP server 'x' could not be reached"), ToolUnreachable),
    ],
)
def test_a_recorded_mcp_failure_is_raised_again_as_it_came(raised, again):
    recorder = CallRecorder(run_id=0, max_bytes=1000)
    request = {"server": "x", "tool": "t", "arguments": {"k": 1}}

    def send():
        raise raised

    with pytest.raises(type(raised)):
        recorder.tap_for("s", None, "x_t").mcp_exchange(request, send, Redactor())
    [kept] = recorder._kept
    row = ToolCallRecording(**store_unescape(kept.fields))
    calls = RecordedCalls({"s": [_Recorded(row, _key_of(row))]})

    with pytest.raises(again) as caught:
        calls.tap_for("s", None, "x_t").mcp_exchange(request, _never, Redactor())

    assert str(caught.value) == str(raised)
    if isinstance(raised, MCPError):
        assert caught.value.code == -32602


def _never():
    raise AssertionError("a replay never sends")


def test_calls_a_failed_flush_could_not_store_are_stored_by_the_next(monkeypatch):
    from django.db import OperationalError

    from runs.models import StepResult

    workflow, _ = workflow_import(
        data={"name": "flush_again", "steps": [{"id": "s", "kind": "transform", "expression": "x"}]}
    )
    run = Run.objects.create(workflow=workflow, definition_hash="h", trigger="validation")
    step = StepResult.objects.create(run=run, step_id="s")
    recorder = CallRecorder(run_id=run.pk, max_bytes=1000)
    request = {"server": "x", "tool": "t", "arguments": {"k": 1}}

    def refused():
        raise MCPError(-32602, "bad arguments")

    with pytest.raises(MCPError):
        recorder.tap_for("s", None, "x_t").mcp_exchange(request, refused, Redactor())
    real = ToolCallRecording.objects.bulk_create

    def lost_connection(*args, **kwargs):
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(ToolCallRecording.objects, "bulk_create", lost_connection)
    with pytest.raises(OperationalError):
        recorder.flush()
    monkeypatch.setattr(ToolCallRecording.objects, "bulk_create", real)
    recorder.flush()  # as a settle retried on a new connection does
    recorder.close()  # nothing left: stored once

    [stored] = ToolCallRecording.objects.filter(step_result=step)
    assert (stored.kind, stored.tool, stored.request) == ("mcp", "x_t", request)
    assert stored.error["message"] == "bad arguments"


def test_text_no_database_can_hold_is_stored_and_replayed_intact(db):
    import mcp_types as types

    from tests.factories import StepResultFactory
    from tools.llm import LLMReply, Usage

    step = StepResultFactory(step_id="s", run__trigger="validation")
    odd = "nul \x00 and a lone \ud800 surrogate"
    request = {"server": "x", "tool": "t", "arguments": {"text": odd}}
    result = types.CallToolResult(content=[], structuredContent={"echo": odd})
    reply = LLMReply(odd, (), Usage(1, 1, 2), {}, "m", "stop", ({"attempt": 1, "status": 200},))
    chat = {"model": "m", "messages": [{"role": "user", "content": odd}]}
    recorder = CallRecorder(run_id=step.run_id, max_bytes=1000)
    recorder.tap_for("s", None, "x_t").mcp_exchange(request, lambda: result, Redactor())
    recorder.chat_tap_for("s", endpoint="default", model=None, redactor=Redactor()).chat(
        chat, lambda: reply
    )
    recorder.close()

    calls = RecordedCalls.of(step.run)
    again = calls.tap_for("s", None, "x_t").mcp_exchange(request, _never, Redactor())
    said = calls.chat_tap_for("s", endpoint="default", model=None, redactor=Redactor()).chat(
        chat, _never
    )

    assert again.structured_content == {"echo": odd}
    assert (said.content, said.finish_reason, said.usage.total_tokens) == (odd, "stop", 2)
    assert calls.unused() == {}
