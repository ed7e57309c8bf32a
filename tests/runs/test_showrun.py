"""The command line tells what happened: ``showrun``, ``listruns``, the debug log lines of
``runflow`` / ``resumeflow``, and what ``runflow --dry-run`` shows of llm steps.

Runs are real: the shipped GitHub tools against the loopback fake API (a failed run
and a succeeded one, ``tests.runs.samples``), llm steps against the loopback
OpenAI-compatible server.
"""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from django.utils import timezone

from runs.cli_runs import SinceInvalid, parse_since
from runs.engine.kinds.llm import prompt_lines
from runs.models import Run
from tests.conftest import EXAMPLE_TOOLS_DIR, write_flow
from tests.factories import RunFactory, StepResultFactory
from tests.fakes.mcp_server import TOKEN, running_mcp_fake
from tests.runs.samples import SECRET_TOKEN, failed_flow, make_failed_run, make_succeeded_run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("example_tools")]


# --- showrun --------------------------------------------------------------------------


def test_showrun_of_a_failed_run(cli, fake_api, monkeypatch):
    run = make_failed_run(fake_api, monkeypatch)

    result = cli("showrun", str(run.pk))

    assert result.code == 0, result.err
    lines = result.lines
    assert lines[0].startswith(f"run {run.pk} of repo_report v1: failed (trigger cli), took ")
    assert lines[2].startswith("error: step `langs` failed (http_error): GET http://127.0.0.1:")
    assert lines[3] == "steps (4): 1 failed, 1 pending, 2 succeeded"
    text = result.out
    assert re.search(r"  succeeded  repo +tool github_repo  2 tries  started .+  took \d+ ms", text)
    sent = r"sent GET http://127\.0\.0\.1:\d+/repos/octo-org/widgets"
    retried = (
        rf"      try 1: failed in \d+ ms \(http_error\), {sent} → 5\d\d, "
        r"retry in 0\.2 s \(backoff\)\n"
    )
    assert re.search(retried, text)
    assert re.search(rf"      try 2: succeeded in \d+ ms, {sent} → 200\n", text)
    assert "      output: object with 9 keys: default_branch, description, forks, full_name" in text
    assert re.search(r"  failed     langs +tool github_languages  1 try", text)
    assert (
        "      error from step `langs` (tool `github_languages`), try 1: "
        "http_error (HTTP 404, not retryable)"
    ) in text
    assert "/repos/octo-org/widgets/languages returned HTTP 404" in text
    assert re.search(r"  pending    summary +transform  0 tries  started -  took -", text)
    assert SECRET_TOKEN not in text


def test_showrun_of_a_succeeded_run_and_its_json(cli, fake_api, monkeypatch):
    run = make_succeeded_run(fake_api, monkeypatch)

    result = cli("showrun", str(run.pk))

    assert result.code == 0, result.err
    assert result.lines[0].startswith(f"run {run.pk} of repo_report_ok v1: succeeded (trigger api)")
    assert "error" not in result.out
    assert result.out.count("  succeeded  ") == 4
    assert "      output: object with 2 keys: langs, open" in result.out

    record = json.loads(cli("showrun", str(run.pk), "--json").out)
    assert record["status"] == "succeeded"
    assert record["outputs"] == {"open": 7, "stars": 1523}
    assert [s["step_id"] for s in record["steps"]] == ["repo", "issues", "langs", "summary"]
    repo = record["steps"][0]
    assert repo["inputs"] == {"owner": "octo-org", "repo": "widgets"}
    assert repo["output"]["stars"] == 1523
    assert repo["attempt_log"][0]["status"] == "succeeded"
    assert repo["output_summary"].startswith("object with 9 keys")
    assert repo["output_size"] == len(json.dumps(repo["output"], ensure_ascii=False).encode())
    assert SECRET_TOKEN not in json.dumps(record)


def test_showrun_json_of_a_failed_run_has_the_error_and_every_try(cli, fake_api, monkeypatch):
    run = make_failed_run(fake_api, monkeypatch)

    record = json.loads(cli("showrun", str(run.pk), "--json").out)

    steps = {s["step_id"]: s for s in record["steps"]}
    assert record["error_summary"].startswith("step `langs` failed")
    assert steps["langs"]["error"]["status"] == 404
    assert steps["langs"]["error_origin"].startswith("step `langs` (tool `github_languages`)")
    assert [a["status"] for a in steps["repo"]["attempt_log"]] == ["failed", "succeeded"]
    assert steps["summary"]["status"] == "pending"
    assert record["step_counts"] == {"failed": 1, "pending": 1, "succeeded": 2}


def test_showrun_reads_a_hostile_attempt_log(cli):
    run = RunFactory(status="failed")
    StepResultFactory(
        run=run,
        step_id="odd",
        status="failed",
        attempts=2,
        error={"type": "x", "message": "<b>boom</b>"},
        attempt_log=["not an entry", {"duration_ms": "slow", "error": "text", "worker": "w1"}],
    )

    result = cli("showrun", str(run.pk))

    assert result.code == 0, result.err
    assert "      try ?: ? in 0 ms on w1" in result.lines
    assert "      <b>boom</b>" in result.lines


def test_showrun_of_an_unknown_run_says_so(cli):
    result = cli("showrun", "424242")
    assert result.code == 1
    assert "no run 424242 (listruns shows the recent ones)" in result.err


# --- listruns -------------------------------------------------------------------------


def test_listruns_with_filters(cli, fake_api, monkeypatch):
    failed = make_failed_run(fake_api, monkeypatch)
    succeeded = make_succeeded_run(fake_api, monkeypatch)

    every = cli("listruns")
    assert every.code == 0, every.err
    assert every.lines[0].split() == [
        "ID", "WORKFLOW", "VER", "STATUS", "TRIGGER", "CREATED", "TOOK",
    ]  # fmt: skip
    assert [line.split()[0] for line in every.lines[1:]] == [str(succeeded.pk), str(failed.pk)]
    assert every.lines[2].split()[1:5] == ["repo_report", "1", "failed", "cli"]

    def ids(*args: str) -> list[str]:
        result = cli("listruns", *args)
        assert result.code == 0, result.err
        return [line.split()[0] for line in result.lines[1:]]

    assert ids("--status", "failed") == [str(failed.pk)]
    assert ids("--trigger", "api") == [str(succeeded.pk)]
    Run.objects.filter(pk=failed.pk).update(trigger="webhook")
    assert ids("--trigger", "webhook") == [str(failed.pk)]
    assert cli("listruns", "--trigger", "mcp").out.strip() == "no runs match"
    Run.objects.filter(pk=failed.pk).update(trigger="cli")
    assert ids("--workflow", "repo_report") == [str(failed.pk)]
    assert ids("--since", "1h", "--limit", "1") == [str(succeeded.pk)]
    assert ids("--since", timezone.now().date().isoformat()) == [str(succeeded.pk), str(failed.pk)]
    assert cli("listruns", "--since", "2999-01-01T00:00:00+00:00").out.strip() == "no runs match"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday"], "--since 'yesterday' is not a duration (30m, 6h, 2d, 1w)"),
        (["--since", "2026-13-45"], "--since '2026-13-45' is not a duration"),
        (["--limit", "0"], "--limit '0' is not a whole number of 1 or more"),
        (["--limit", "many"], "--limit 'many' is not a whole number of 1 or more"),
    ],
)
def test_listruns_refuses_bad_filters_naming_them(cli, args, message):
    result = cli("listruns", *args)
    assert result.code == 1
    assert message in result.err


def test_parse_since():
    now = timezone.now()
    assert parse_since("30m", now=now) == now - timedelta(minutes=30)
    assert parse_since("2d", now=now) == now - timedelta(days=2)
    assert parse_since("1w", now=now) == now - timedelta(weeks=1)
    assert parse_since("2026-11-24T09:00:00+01:00", now=now).hour == 9
    assert parse_since("2026-11-24T09:00:00", now=now).tzinfo is not None
    with pytest.raises(SinceInvalid):
        parse_since("5y", now=now)


# --- debug logs -------------------------------------------------------------------------


def test_debug_logs_of_a_failed_and_a_resumed_run(
    cli, fake_api, monkeypatch, tmp_path, capsys, restore_loggers
):
    monkeypatch.setenv("GITHUB_TOKEN", SECRET_TOKEN)
    fake_api.fail("github_languages", status=404, body={"message": f"no {SECRET_TOKEN}"})
    path = write_flow(tmp_path, failed_flow())

    result = cli(
        "runflow", path, "--tools", str(EXAMPLE_TOOLS_DIR), "--log-level", "debug",
        "--input", "owner=octo-org", "--input", "repo=widgets",
    )  # fmt: skip
    log = capsys.readouterr().err

    assert result.code == 1
    run = Run.objects.get()
    for step in ("repo", "issues", "langs"):
        assert f"run {run.pk}: step {step} started" in log
    assert re.search(rf"run {run.pk}: step repo succeeded in \d+ ms \(1 try\)", log)
    assert re.search(rf"run {run.pk}: step langs failed in \d+ ms \(1 try\): http_error: ", log)
    assert re.search(
        rf"run {run.pk} step repo: tool github_repo arguments \{{.*\}} "
        r'request \{"method": "GET", "url": '
        r'"http://127\.0\.0\.1:\d+/repos/octo-org/widgets", "status": 200, .*\} -> '
        r"response object with 9 keys: default_branch, .* \(\d+ B\)",
        log,
    )
    assert re.search(
        rf"run {run.pk} step langs: tool github_languages arguments \{{.*\}} failed: .*HTTP 404",
        log,
    )
    assert "no ***" in log  # the echoed token, masked
    assert SECRET_TOKEN not in log + result.out + result.err

    fake_api.heal()
    resumed = cli("resumeflow", str(run.pk), "--log-level", "Debug")
    log = capsys.readouterr().err
    assert resumed.code == 0, resumed.out + resumed.err
    assert f"run {run.pk}: step langs started" in log
    assert re.search(rf"run {run.pk}: step summary succeeded in \d+ ms \(1 try\)", log)
    assert "step repo started" not in log  # kept from the checkpoint
    assert SECRET_TOKEN not in log


def test_log_level_is_any_case_and_still_checked(cli, tmp_path, restore_loggers):
    path = write_flow(tmp_path, failed_flow())
    result = cli("runflow", path, "--dry-run", "--log-level", "verbose")
    assert result.code != 0
    assert "invalid choice: 'VERBOSE'" in result.err


LLM_FLOW = {
    "name": "llm_debug",
    "inputs": {"city": {"type": "string"}, "notes": {"type": "string", "default": "x" * 900}},
    "steps": [
        {
            "id": "ask",
            "kind": "llm",
            "prompt": "Weather words for {{city}}. Notes: {{notes}}",
            "input_mapping": {"city": "$input.city", "notes": "$input.notes"},
        },
        {
            "id": "route",
            "kind": "decision",
            "branches": ["short", "long"],
            "decision_prompt": "Is this answer short or long? {{answer}}",
            "model": "router-model",
            "input_mapping": {"answer": "ask.result"},
        },
        {"id": "done", "kind": "transform", "expression": "`1`", "input_mapping": {}},
    ],
    "edges": [
        {"from": "route", "to": "done", "when": "short"},
    ],
    "outputs": {"answer": "ask.result"},
}


def test_debug_logs_carry_an_llm_steps_prompt_and_reply(
    cli, planner_llm, tmp_path, capsys, restore_loggers
):
    planner_llm.reply("Mild and " + "breezy " * 200)
    planner_llm.reply_json({"branch": "long", "reason": "It rambles."})
    path = write_flow(tmp_path, LLM_FLOW)

    result = cli("runflow", path, "--log-level", "DEBUG", "--input", "city=Oslo")
    log = capsys.readouterr().err

    assert result.code == 0, result.out + result.err
    assert "step ask: llm prompt Weather words for Oslo. Notes: xxx" in log
    assert re.search(r"llm prompt Weather words for Oslo\. Notes: x+… \[\d+ characters\]", log)
    assert re.search(r"step ask: llm reply \(fake-model, \d+ tokens\) Mild and breezy", log)
    assert "step route: llm prompt Is this answer short or long? Mild and breezy" in log
    cut = r"llm reply \(fake-model, \d+ tokens\) Mild and breezy[ a-z]*… \[\d+ characters\]"
    assert re.search(cut, log)
    assert '{"branch": "long", "reason": "It rambles."}' in log


def test_dry_run_shows_llm_models_rendered_prompts_tools_and_labels(cli, tmp_path):
    ask = {
        **LLM_FLOW["steps"][0],
        "prompt": LLM_FLOW["steps"][0]["prompt"] + "\nExtra: {{extra}}",
        "tools": ["github_repo"],
        "output_schema": {"type": "object"},
    }
    ask["input_mapping"] = {**ask["input_mapping"], "extra": {"k": ["$input.city", "lit"]}}
    path = write_flow(tmp_path, {**LLM_FLOW, "steps": [ask, *LLM_FLOW["steps"][1:]]})

    result = cli("runflow", path, "--dry-run", "--input", "city=Oslo", "--input", "notes=dry")

    assert result.code == 0, result.out + result.err
    text = result.out
    assert "    ask                    llm" in text
    assert "        model: fake-planner (PLANNER_MODEL" not in text  # no fake LLM here
    assert re.search(r"        model: \S+ \(PLANNER_MODEL, the endpoint's default\)", text)
    assert "        tools: github_repo" in text
    assert "        output: structured (output_schema)" in text
    assert "        prompt:\n          | Weather words for Oslo. Notes: dry" in text
    assert "        model: router-model" in text
    assert "          | Is this answer short or long? <ask.result>" in text
    assert "        labels: short | long" in text
    assert '          | Extra: {"k":["Oslo","lit"]}' in text
    assert Run.objects.count() == 0


class _Known:
    def __call__(self, value):
        return str(value)

    def known(self, value):
        return value


def test_a_prompt_that_cannot_be_rendered_is_shown_as_written():
    lines = prompt_lines("prompt", "Hi {{a", {"a": "x"}, _Known())
    assert lines[0].startswith("        prompt (not rendered: unbalanced '{{' or '}}'")
    assert lines[1:] == ["          | Hi {{a"]


MCP_TOOLS = """
mcp_server:
  name: fake
  url: "{{env.FAKE_MCP_URL}}"
  headers: {X-Token: "{{env.FAKE_MCP_TOKEN}}"}
  secret_headers: [X-Token]
  timeout: 5
"""


def test_debug_logs_show_each_tool_call_s_masked_arguments_and_result_preview(
    cli, fake_api, monkeypatch, tmp_path, capsys, restore_loggers, output_dir
):
    """http, built-in and MCP tools alike: the arguments and a bounded preview of the
    result, with the secret masked by value in both."""
    monkeypatch.setenv("GITHUB_TOKEN", SECRET_TOKEN)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "fake.yaml").write_text(MCP_TOOLS, encoding="utf-8")
    flow = {
        "name": "logged_calls",
        "tools": ["github_repo", "write_json", "fake_add"],
        "steps": [
            {"id": "repo", "kind": "tool", "tool": "github_repo",
             "input_mapping": {"owner": "octo-org", "repo": "widgets"}},
            {"id": "save", "kind": "tool", "tool": "write_json",
             "input_mapping": {"path": "note.json",
                               "data": {"note": f"the token is {SECRET_TOKEN}",
                                        "pad": "y" * 900}}},
            {"id": "sum", "kind": "tool", "tool": "fake_add",
             "input_mapping": {"a": 40, "b": 2}},
        ],
    }  # fmt: skip
    with running_mcp_fake() as mcp:
        monkeypatch.setenv("FAKE_MCP_URL", mcp.url)
        monkeypatch.setenv("FAKE_MCP_TOKEN", TOKEN)
        result = cli(
            "runflow", write_flow(tmp_path, flow), "--tools", str(EXAMPLE_TOOLS_DIR),
            "--tools", str(tools), "--log-level", "debug",
        )  # fmt: skip
    log = capsys.readouterr().err

    assert result.code == 0, result.out + result.err
    run = Run.objects.get()
    assert re.search(
        rf'run {run.pk} step repo: tool github_repo arguments \{{"owner": "octo-org", '
        r'"repo": "widgets"\} request .* -> response object .* preview \{"', log
    )
    save = next(line for line in log.splitlines() if "step save: tool write_json" in line)
    assert '"note": "the token is ***"' in save  # the argument, masked by value
    assert "… [" in save  # the 900-character pad is cut: the line stays bounded
    assert len(save) < 2000
    assert re.search(r'preview \{"path": ".*note\.json", "bytes": \d+\}', save)
    assert re.search(
        rf'run {run.pk} step sum: tool fake_add arguments \{{"a": 40, "b": 2\}} '
        r'request \(no HTTP request\) -> .* preview \{"sum": 42\}', log
    )
    assert SECRET_TOKEN not in log
    assert TOKEN not in log
