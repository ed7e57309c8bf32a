"""Failures end to end: retries, fatal errors, on_error: continue, resume, cancel, hostile input.

Named after the feature, not a module: failures cross the command, engine, tools and services.

Runs go through ``runflow`` / ``resumeflow`` with the shipped tool files, against
the recording fake of the public APIs (``fake_api``), whose routes are made to
fail on purpose.
"""

from __future__ import annotations

import json
import re
import threading
import time
import tracemalloc

import pytest
from django.db import connection
from django.forms.models import model_to_dict

from runs.models import Run, StepResult
from runs.services import run_cancel, run_create, run_execute
from tests.conftest import EXAMPLE_TOOLS_DIR, EXAMPLES_DIR, write_flow
from tests.fakes import FakeResponse
from tests.fakes.apis import default_repo
from workflows.files import read_workflow_file
from workflows.models import Workflow

pytestmark = pytest.mark.django_db(transaction=True)

FAST_RETRY = {"max_attempts": 3, "initial_delay": 0.01, "max_delay": 0.05, "jitter": 0}


def runflow(cli, target: str, *inputs: str):
    args = ["runflow", target, "--tools", str(EXAMPLE_TOOLS_DIR)]
    for pair in inputs:
        args += ["--input", pair]
    return cli(*args)


def statuses(run: Run) -> dict[str, tuple[str, int]]:
    return {r.step_id: (r.status, r.attempts) for r in run.step_results.order_by("step_id")}


def repo_flow(**step_extra) -> dict:
    """One github_repo step (plus whatever the test adds)."""
    return {
        "name": "repo_only",
        "inputs": {"owner": {"type": "string"}, "repo": {"type": "string"}},
        "steps": [
            {
                "id": "repo",
                "kind": "tool",
                "tool": "github_repo",
                "input_mapping": {"owner": "$input.owner", "repo": "$input.repo"},
                **step_extra,
            }
        ],
        "outputs": {"stars": "repo.stars"},
    }


# --- retries ----------------------------------------------------------------------


def test_503_twice_then_200_succeeds_on_the_third_attempt(fake_api, cli, tmp_path):
    fake_api.fail("github_repo", status=503, times=2, body={"message": "Service Unavailable"})
    flow = write_flow(tmp_path, repo_flow(retry=FAST_RETRY))

    result = runflow(cli, flow, "owner=octo-org", "repo=widgets")

    assert result.code == 0, result.out + result.err
    assert [r.status for r in fake_api.requests("github_repo")] == [503, 503, 200]
    run = Run.objects.get()
    assert run.status == "succeeded"
    assert run.outputs == {"stars": 1523}
    step = run.step_results.get()
    assert (step.status, step.attempts) == ("succeeded", 3)
    log = step.attempt_log
    assert [(a["attempt"], a["status"]) for a in log] == [
        (1, "failed"),
        (2, "failed"),
        (3, "succeeded"),
    ]
    for entry in log[:2]:
        assert entry["error"]["type"] == "http_error"
        assert entry["error"]["status"] == 503
        assert entry["error"]["retryable"] is True
        assert 0 <= entry["retry_in"] <= 0.05
    assert step.error is None
    assert re.search(r"^  ok\s+repo\s+\d+ ms  \(3 attempts\)$", result.out, re.M)


def test_the_tool_files_retry_policy_applies_when_the_step_has_none(fake_api, cli):
    fake_api.fail("ipapi", status=502, times=1)

    result = runflow(cli, str(EXAMPLES_DIR / "geo_weather.yaml"))

    assert result.code == 0, result.out + result.err
    run = Run.objects.get()
    assert statuses(run)["locate"] == ("succeeded", 2)
    assert [r.status for r in fake_api.requests("ipapi")] == [502, 200]


def test_429_is_retried_after_the_servers_retry_after(fake_api, cli, tmp_path):
    fake_api.fail("github_repo", status=429, times=1, headers={"Retry-After": "0"})
    flow = write_flow(tmp_path, repo_flow(retry=FAST_RETRY))

    result = runflow(cli, flow, "owner=octo-org", "repo=widgets")

    assert result.code == 0, result.out + result.err
    step = StepResult.objects.get()
    assert step.attempts == 2
    assert step.attempt_log[0]["error"]["type"] == "rate_limited"


def test_retries_stop_at_max_attempts_and_fail_the_run(fake_api, cli, tmp_path):
    fake_api.fail("github_repo", status=500)
    flow = write_flow(tmp_path, repo_flow(retry=FAST_RETRY))

    result = runflow(cli, flow, "owner=octo-org", "repo=widgets")

    assert result.code == 1
    assert len(fake_api.requests("github_repo")) == 3
    step = StepResult.objects.get()
    assert (step.status, step.attempts) == ("failed", 3)
    assert step.error["type"] == "http_error"
    assert step.error["status"] == 500


def test_a_step_timeout_is_retryable(fake_api, cli, tmp_path):
    fake_api.fail("github_repo", status=500, times=1, delay=1.0)  # the answer comes too late
    flow = write_flow(tmp_path, repo_flow(retry=FAST_RETRY, timeout=0.2))

    result = runflow(cli, flow, "owner=octo-org", "repo=widgets")

    assert result.code == 0, result.out + result.err
    step = StepResult.objects.get()
    assert step.attempts == 2
    first = step.attempt_log[0]["error"]
    assert first["type"] == "tool_timeout"
    assert first["retryable"] is True
    assert "no answer within 0.2s" in first["message"]


def test_an_unreachable_server_is_retried_then_reported(fake_api, cli, tmp_path, monkeypatch):
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed_port = sock.getsockname()[1]
    monkeypatch.setenv("GITHUB_API_BASE_URL", f"http://127.0.0.1:{closed_port}")
    flow = write_flow(tmp_path, repo_flow(retry=FAST_RETRY))

    result = runflow(cli, flow, "owner=octo-org", "repo=widgets")

    assert result.code == 1
    step = StepResult.objects.get()
    assert (step.status, step.attempts) == ("failed", 3)
    assert step.error["type"] == "tool_unreachable"
    assert step.error["retryable"] is True
    assert "cannot reach the server" in step.error["message"]
    assert "tool_unreachable" in result.out


# --- fatal errors -----------------------------------------------------------------


def test_404_is_fatal_not_retried_and_the_run_fails_with_a_resume_hint(fake_api, cli):
    result = runflow(cli, str(EXAMPLES_DIR / "github_intel.yaml"), "owner=nobody", "repo=nothing")

    assert result.code == 1
    run = Run.objects.get()
    assert run.status == "failed"
    assert run.outputs is None
    assert "step `repo` failed (http_error)" in run.error_summary
    assert "404" in run.error_summary
    assert len(fake_api.requests()) == 1  # no retry, nothing after the failed step
    assert fake_api.requests()[0].path == "/repos/nobody/nothing"
    assert statuses(run) == {
        "repo": ("failed", 1),
        "contributors": ("skipped", 0),
        "issues": ("skipped", 0),
        "languages": ("skipped", 0),
        "post": ("skipped", 0),
        "releases": ("skipped", 0),
    }
    error = run.step_results.get(step_id="repo").error
    assert error["type"] == "http_error"
    assert error["status"] == 404
    assert error["retryable"] is False
    assert "Not Found" in error["message"]

    lines = result.lines
    assert re.match(
        r"^  FAILED\s+repo\s+\d+ ms  http_error: GET http://127\.0\.0\.1:\d+/", lines[1]
    )
    assert sorted(line.split()[1] for line in lines if line.startswith("  skipped")) == [
        "contributors",
        "issues",
        "languages",
        "post",
        "releases",
    ]
    assert f"run {run.pk} failed" in result.out
    assert "error: step `repo` failed (http_error)" in result.out
    assert lines[-1] == f"resume with: manage.py resumeflow {run.pk}"
    assert f"CommandError: run {run.pk} failed" in result.err


def test_a_bad_argument_for_the_tool_schema_fails_before_any_call(fake_api, cli):
    result = runflow(cli, str(EXAMPLES_DIR / "geo_weather.yaml"), "ip=10.0.0.1")

    # ip-api answers 200 with status "fail" and no coordinates: the weather tool
    # gets null latitude/longitude, which its input schema refuses (fatal).
    assert result.code == 1
    run = Run.objects.get()
    assert statuses(run)["locate"] == ("succeeded", 1)
    assert statuses(run)["weather"] == ("failed", 1)
    assert run.step_results.get(step_id="weather").error["type"] == "tool_input_invalid"
    assert fake_api.requests("weather") == []
    assert fake_api.requests("restcountries") == []


# --- on_error: continue -------------------------------------------------------------


def test_on_error_continue_keeps_the_run_going_and_exposes_the_error(fake_api, cli, tmp_path):
    flow = repo_flow(on_error="continue")
    flow["tools"] = ["github_repo", "post_json"]
    flow["steps"].append(
        {
            "id": "report",
            "kind": "tool",
            "tool": "post_json",
            "input_mapping": {
                "payload": {
                    "error_type": "repo.error.type",
                    "error_status": "repo.error.status",
                    "stars": "repo.stars",
                }
            },
        }
    )
    flow["outputs"] = {"stars": "repo.stars", "error": "repo.error.type"}
    path = write_flow(tmp_path, flow)

    result = runflow(cli, path, "owner=nobody", "repo=nothing")

    assert result.code == 0, result.out + result.err
    run = Run.objects.get()
    assert run.status == "succeeded"
    assert statuses(run) == {"repo": ("failed", 1), "report": ("succeeded", 1)}
    assert fake_api.requests("post")[0].json() == {
        "error_type": "http_error",
        "error_status": 404,
        "stars": None,
    }
    assert run.outputs == {"stars": None, "error": "http_error"}
    assert re.search(r"^  FAILED\s+repo\b", result.out, re.M)
    assert f"run {run.pk} succeeded" in result.out


# --- resume -------------------------------------------------------------------------


def resume_flow() -> dict:
    return {
        "name": "resume_demo",
        "inputs": {"ip": {"type": "string", "default": "85.214.132.117"}},
        "steps": [
            {"id": "locate", "kind": "tool", "tool": "ip_geolocate",
             "input_mapping": {"ip": "$input.ip"}},
            {"id": "country", "kind": "tool", "tool": "country_info",
             "input_mapping": {"code": "locate.country_code"}},
            {"id": "notify", "kind": "tool", "tool": "post_json", "retry": {"max_attempts": 1},
             "input_mapping": {"payload": {"city": "locate.city", "country": "country.name"}}},
        ],
        "outputs": {"city": "locate.city", "delivered": "notify.json"},
    }  # fmt: skip


def test_resume_continues_from_the_checkpoint_and_never_reruns_succeeded_steps(
    fake_api, cli, tmp_path
):
    fake_api.fail("post", status=500, body={"message": "webhook down"})
    path = write_flow(tmp_path, resume_flow())

    first = runflow(cli, path)

    assert first.code == 1
    run = Run.objects.get()
    assert run.status == "failed"
    assert statuses(run) == {
        "country": ("succeeded", 1),
        "locate": ("succeeded", 1),
        "notify": ("failed", 1),
    }
    assert first.lines[-1] == f"resume with: manage.py resumeflow {run.pk}"

    fake_api.heal("post")
    second = cli("resumeflow", str(run.pk))

    assert second.code == 0, second.out + second.err
    assert second.lines[0] == f"run {run.pk}: resuming resume_demo v1; 2 succeeded step(s) kept"
    assert re.search(r"^  ok\s+notify\b", second.out, re.M)
    assert not re.search(r"^  ok\s+(locate|country)\b", second.out, re.M)
    assert f"run {run.pk} succeeded" in second.out
    # the resume's own time, then the run's total since it first started
    took = re.search(
        rf"^run {run.pk} succeeded in ([\d.]+) s \(this resume\); ([\d.]+) s since the run "
        "first started$",
        second.out,
        re.M,
    )
    assert took, second.out
    assert float(took.group(1)) <= float(took.group(2))
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert run.started_at < run.resumed_at < run.finished_at
    assert run.resume_duration == run.finished_at - run.resumed_at < run.duration
    shown = cli("showrun", str(run.pk))
    assert re.search(r"took [\d.]+ m?s in all \([\d.]+ m?s since it was resumed\)", shown.out), (
        shown.out
    )
    assert run.error_summary == ""
    assert run.outputs == {"city": "Berlin", "delivered": {"city": "Berlin", "country": "Germany"}}
    assert len(fake_api.requests("ipapi")) == 1
    assert len(fake_api.requests("restcountries")) == 1
    posts = fake_api.requests("post")
    assert [p.status for p in posts] == [500, 200]
    # The idempotency key is stable per run (its UUID) and step, so the retry is safe to dedupe.
    assert {p.headers["idempotency-key"] for p in posts} == {f"{run.uuid}:notify"}
    notify = run.step_results.get(step_id="notify")
    assert notify.attempts == 2
    assert [a["status"] for a in notify.attempt_log] == ["failed", "succeeded"]
    assert Run.objects.count() == 1


def test_resume_refuses_a_succeeded_run_and_an_unknown_run(fake_api, cli):
    assert runflow(cli, str(EXAMPLES_DIR / "geo_weather.yaml")).code == 0
    run = Run.objects.get()

    again = cli("resumeflow", str(run.pk))
    missing = cli("resumeflow", "999999")

    assert again.code == 1
    assert f"run {run.pk} is succeeded; only failed or cancelled runs resume" in again.err
    assert missing.code != 0
    assert "no run 999999" in missing.err
    assert len(fake_api.requests()) == 3  # nothing ran again


def test_resume_after_an_upstream_output_was_capped_does_not_pass_null_silently(
    fake_api, cli, tmp_path, settings
):
    settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES = 64  # `locate` is stored as a preview
    data = read_workflow_file(EXAMPLES_DIR / "geo_weather.yaml")
    data["steps"][2]["retry"] = {"max_attempts": 1}
    fake_api.fail("restcountries", status=500, times=1)
    path = write_flow(tmp_path, data)
    assert runflow(cli, path).code == 1
    run = Run.objects.get()
    assert run.step_results.get(step_id="locate").output_truncated

    result = cli("resumeflow", str(run.pk))

    resumed_ok = result.code == 0 and [r.path for r in fake_api.requests("restcountries")] == [
        "/v3.1/alpha/US",
        "/v3.1/alpha/US",
    ]
    assert resumed_ok or "truncated" in result.out, result.out


# --- cancel (service level) -----------------------------------------------------------


def test_cancelling_a_running_run_lets_the_step_in_flight_finish_and_starts_nothing(
    fake_api, example_tools
):
    from workflows.files import read_workflow_file
    from workflows.services import workflow_import

    workflow, _ = workflow_import(data=read_workflow_file(EXAMPLES_DIR / "geo_weather.yaml"))
    run = run_create(workflow=workflow, trigger="api", inputs={})
    fake_api.delay("ipapi", 0.5)
    finished: list[Run] = []

    def execute() -> None:
        try:
            finished.append(run_execute(run=Run.objects.get(pk=run.pk)))
        finally:
            connection.close()

    worker = threading.Thread(target=execute)
    worker.start()
    deadline = time.monotonic() + 5
    while not fake_api.requests("ipapi") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True
    worker.join(timeout=10)

    assert not worker.is_alive()
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert finished[0].status == "cancelled"
    assert fake_api.requests("weather") == []
    assert fake_api.requests("restcountries") == []
    result = statuses(run)
    assert result["weather"] == ("skipped", 0)
    assert result["country"] == ("skipped", 0)
    assert result["locate"][0] in {"succeeded", "skipped"}


# --- hostile input --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("suffix", "text", "expected"),
    [
        (".yaml", "name: bad\nsteps:\n  - id: a\n    kind: [tool\n", r"invalid YAML at line \d+, column \d+"),  # noqa: E501
        (".json", '{"name": "bad",\n "steps": [,]}', r"invalid JSON at line 2, column \d+"),
        (".yaml", "- just\n- a list\n", r"must hold a mapping, found list"),
    ],
    ids=["yaml", "json", "not-a-mapping"],
)  # fmt: skip
def test_malformed_workflow_files_get_a_located_message_and_exit_1(
    fake_api, cli, tmp_path, suffix, text, expected
):
    path = tmp_path / f"bad{suffix}"
    path.write_text(text, encoding="utf-8")

    result = runflow(cli, str(path))

    assert result.code == 1
    assert str(path) in result.err
    assert re.search(expected, result.err), result.err
    assert Workflow.objects.count() == 0
    assert Run.objects.count() == 0
    assert fake_api.requests() == []


def test_unknown_input_reference_is_reported_and_nothing_runs(fake_api, cli, tmp_path):
    flow = repo_flow()
    flow["steps"][0]["input_mapping"]["owner"] = "$input.nope"
    path = write_flow(tmp_path, flow)

    result = runflow(cli, path, "owner=o", "repo=r")

    assert result.code == 1
    assert "steps[0].input_mapping.owner" in result.out
    assert "[unknown_input]" in result.out
    assert "nope" in result.out
    assert "validation error(s); not run" in result.err
    assert Run.objects.count() == 0
    assert fake_api.requests() == []


def test_a_reference_to_a_step_that_does_not_exist_is_reported(fake_api, cli, tmp_path):
    flow = repo_flow()
    flow["outputs"] = {"stars": "repo.stars", "ghost": "ghost.value"}
    flow["edges"] = [{"from": "ghost", "to": "repo"}]
    path = write_flow(tmp_path, flow)

    result = runflow(cli, path, "owner=o", "repo=r")

    assert result.code == 1
    assert "[edge_unknown_step]" in result.out
    assert "ghost" in result.out
    assert Run.objects.count() == 0
    assert fake_api.requests() == []


def test_duplicate_step_ids_are_reported_not_a_crash(fake_api, cli, tmp_path):
    step = {"kind": "tool", "tool": "country_info", "input_mapping": {"code": "DE"}}
    path = write_flow(
        tmp_path, {"name": "dups", "steps": [{"id": "a", **step}, {"id": "a", **step}]}
    )

    result = runflow(cli, path)

    assert result.code == 1
    assert "duplicate" in result.out + result.err
    assert fake_api.requests() == []


def test_a_cycle_is_reported_with_its_steps(fake_api, cli, tmp_path):
    step = {"kind": "tool", "tool": "country_info"}
    flow = {
        "name": "cyclic",
        "steps": [
            {"id": "a", **step, "input_mapping": {"code": "b.name"}},
            {"id": "b", **step, "input_mapping": {"code": "a.name"}},
        ],
    }
    path = write_flow(tmp_path, flow)

    result = runflow(cli, path)

    assert result.code == 1
    assert "[cycle]" in result.out
    assert "steps form a cycle: `a` → `b`" in result.out
    assert fake_api.requests() == []


@pytest.mark.parametrize(
    ("owner", "repo", "raw_owner", "raw_repo"),
    [
        ("../../admin", "x?admin=1#", "..%2F..%2Fadmin", "x%3Fadmin%3D1%23"),
        ("a/b", "@evil.example", "a%2Fb", "%40evil.example"),
    ],
    ids=["traversal-and-query", "slash-and-at"],
)
def test_url_template_values_stay_inside_one_path_segment(
    fake_api, cli, owner, repo, raw_owner, raw_repo
):
    fake_api.data.repos[(owner.lower(), repo.lower())] = default_repo(owner, repo)

    result = runflow(cli, str(EXAMPLES_DIR / "github_intel.yaml"), f"owner={owner}", f"repo={repo}")

    github = [r for r in fake_api.requests() if r.route and r.route.startswith("github")]
    assert len(github) == 5, result.out + result.err
    base = f"/repos/{raw_owner}/{raw_repo}"
    assert sorted(r.path for r in github) == sorted(
        [base, *(f"{base}/{tail}" for tail in ("contributors", "issues", "languages", "releases"))]
    )
    for request in github:
        assert request.segments[1:3] == [owner, repo]
        assert "admin" not in request.query
    assert all(r.route is not None for r in fake_api.requests())  # no path escaped the API
    assert result.code == 0, result.out + result.err


def test_a_dot_dot_path_value_is_refused_before_any_request(fake_api, cli):
    result = runflow(cli, str(EXAMPLES_DIR / "github_intel.yaml"), "owner=octo-org", "repo=..")

    assert result.code == 1
    assert "template_error" in result.out
    assert "would walk the path" in result.out
    assert fake_api.requests() == []  # the first step failed before sending anything


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_50_mb_response_fails_the_extracting_step_with_bounded_memory(
    fake_api, cli, settings, tmp_path, chunked
):
    settings.FLOWPILOT_MAX_RESPONSE_BYTES = 256 * 1024
    total = 50 * 1024 * 1024
    fake_api.respond("github_repo", lambda req, m: FakeResponse.large_json(total, chunked=chunked))
    path = write_flow(tmp_path, repo_flow())

    tracemalloc.start()
    try:
        result = runflow(cli, path, "owner=octo-org", "repo=widgets")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert result.code == 1
    step = StepResult.objects.get()
    assert (step.status, step.attempts) == ("failed", 1)  # fatal: not retried
    assert step.error["type"] == "response_too_large"
    assert str(256 * 1024) in step.error["message"]
    assert "response_too_large" in result.out
    fake_api.wait_finished(timeout=30)
    (request,) = fake_api.requests("github_repo")
    assert request.bytes_sent < total
    assert request.disconnected
    assert peak < 20 * 1024 * 1024, f"peak traced memory {peak} bytes"


def test_an_oversized_response_without_extraction_is_truncated_and_flagged(fake_api, cli, settings):
    settings.FLOWPILOT_MAX_RESPONSE_BYTES = 64 * 1024
    total = 50 * 1024 * 1024
    fake_api.respond("github_languages", lambda req, m: FakeResponse.large_json(total))

    result = runflow(cli, str(EXAMPLES_DIR / "github_intel.yaml"), "owner=octo-org", "repo=widgets")

    assert result.code == 0, result.out + result.err
    languages = StepResult.objects.get(step_id="languages")
    assert languages.status == "succeeded"
    assert languages.output_truncated is True
    assert languages.output["truncated"] is True
    assert languages.output["limit_bytes"] == 64 * 1024
    assert len(languages.output["text"]) <= 64 * 1024
    assert re.search(r"^  ok\s+languages\b.*\[output truncated\]$", result.out, re.M)
    assert fake_api.requests("post")[0].json()["python_bytes"] is None
    fake_api.wait_finished(timeout=30)
    assert fake_api.requests("github_languages")[0].bytes_sent < total


def test_an_unset_optional_input_leaves_the_optional_tool_parameter_out(fake_api, cli, tmp_path):
    flow = {
        "name": "optional_param",
        "inputs": {
            "base": {"type": "string", "default": "USD"},
            "to": {"type": "string", "required": False, "description": "omitted: all"},
        },
        "steps": [
            {"id": "fx", "kind": "tool", "tool": "exchange_rate",
             "input_mapping": {"from": "$input.base", "to": "$input.to"}},
        ],
        "outputs": {"rates": "fx.rates"},
    }  # fmt: skip
    path = write_flow(tmp_path, flow)

    result = runflow(cli, path)

    assert result.code == 0, result.out
    (request,) = fake_api.requests("frankfurter")
    assert request.query == {"from": ["USD"]}
    assert set(Run.objects.get().outputs["rates"]) == {"AUD", "CHF", "EUR", "GBP", "JPY"}


# --- secrets ----------------------------------------------------------------------------


def dump_everything() -> str:
    rows = [model_to_dict(r) for r in Run.objects.all()]
    rows += [model_to_dict(r) for r in StepResult.objects.all()]
    rows += [model_to_dict(w) for w in Workflow.objects.all()]
    return json.dumps(rows, default=str)


def test_secret_values_never_reach_results_runs_or_output(
    fake_api, cli, monkeypatch, tmp_path, capsys, restore_loggers
):
    token = "s3cr3t-gh-token-0f9a8b7c6d"
    hook_key = "s3cr3t-hook-key-1a2b3c4d"
    monkeypatch.setenv("GITHUB_TOKEN", token)
    monkeypatch.setenv("WEBHOOK_API_KEY", hook_key)
    flow = repo_flow()
    flow["tools"] = ["github_repo", "post_json"]
    leak = {
        "id": "leak",
        "kind": "tool",
        "tool": "post_json",
        "input_mapping": {
            "payload": {"stars": "repo.stars", "token": "$env.GITHUB_TOKEN", "note": "hi"}
        },
    }
    flow["steps"].append(leak)
    flow["outputs"] = {"echo": "leak.json", "headers": "leak.headers", "raw": "leak.data"}
    args = ("--tools", str(EXAMPLE_TOOLS_DIR), "--log-level", "DEBUG",
            "--input", "owner=octo-org", "--input", "repo=widgets")  # fmt: skip

    # A credential mapped into another tool's payload is refused before anything runs.
    refused = cli("runflow", write_flow(tmp_path, flow), *args)
    assert refused.code == 1
    assert "steps[1].input_mapping.payload.token  [credential_leak]" in refused.out
    assert fake_api.requests("github_repo") == []
    assert fake_api.requests("post") == []

    del leak["input_mapping"]["payload"]["token"]
    result = cli("runflow", write_flow(tmp_path, flow), *args)
    captured = capsys.readouterr()

    assert result.code == 0, result.out + result.err
    # The secrets were really used ...
    assert fake_api.requests("github_repo")[0].headers["authorization"] == f"Bearer {token}"
    (post,) = fake_api.requests("post")
    assert post.headers["x-api-key"] == hook_key
    # ... and the echo carried one back, yet nothing stored or shown holds them.
    stored_leak = StepResult.objects.get(step_id="leak")
    assert stored_leak.output["headers"]["X-Api-Key"] == "***"
    stored = dump_everything()
    shown = result.out + result.err + captured.out + captured.err
    for secret in (token, hook_key):
        assert secret not in stored
        assert secret not in shown


def test_a_secret_echoed_in_an_error_body_is_scrubbed(fake_api, cli, monkeypatch, tmp_path):
    token = "s3cr3t-gh-token-echoed-77"
    monkeypatch.setenv("GITHUB_TOKEN", token)
    fake_api.fail("github_repo", status=401, body={"message": f"Bad credentials: {token}"})
    path = write_flow(tmp_path, repo_flow())

    result = runflow(cli, path, "owner=octo-org", "repo=widgets")

    assert result.code == 1
    step = StepResult.objects.get()
    assert step.error["type"] == "auth_failed"
    assert "Bad credentials: ***" in step.error["message"]
    assert token not in dump_everything()
    assert token not in result.out + result.err


KEYED_TOOL = """
name: keyed_ip
description: ip-api, with an API key sent as a query parameter.
base_url: "{{env.IPAPI_BASE_URL}}"
request: {method: GET, url: "/json/{{ip}}"}
auth: {type: api_key, in: query, name: key, value: "{{env.IPAPI_KEY}}"}
inputs: {type: object, properties: {ip: {type: string}}, required: [ip]}
response_extract: {city: city}
"""


def test_a_secret_in_the_query_string_stays_out_of_debug_logs(
    fake_api, cli, monkeypatch, tmp_path, capsys, restore_loggers
):
    key = "s3cr3t-query-key-5e6f7a"
    monkeypatch.setenv("IPAPI_KEY", key)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "keyed_ip.yaml").write_text(KEYED_TOOL, encoding="utf-8")
    flow = {
        "name": "keyed",
        "steps": [
            {"id": "locate", "kind": "tool", "tool": "keyed_ip",
             "input_mapping": {"ip": "8.8.8.8"}},
        ],
        "outputs": {"city": "locate.city"},
    }  # fmt: skip
    path = write_flow(tmp_path, flow)

    result = cli("runflow", path, "--tools", str(tools), "--log-level", "DEBUG")
    captured = capsys.readouterr()

    assert result.code == 0, result.out + result.err
    assert fake_api.requests("ipapi")[0].arg("key") == key  # it was sent
    assert key not in dump_everything()
    assert key not in result.out + result.err
    assert key not in captured.out + captured.err


def test_a_timed_out_post_is_received_once_and_stops_for_review(fake_api, cli, tmp_path):
    """post_json is not idempotent: after a timeout the server may have stored the
    payload, so the step's retries are not spent re-sending it."""
    fake_api.delay("post", 1.0)
    flow = {
        "name": "notify_once",
        "inputs": {"city": {"type": "string", "default": "Berlin"}},
        "steps": [
            {"id": "notify", "kind": "tool", "tool": "post_json", "retry": FAST_RETRY,
             "timeout": 0.3, "input_mapping": {"payload": {"city": "$input.city"}}},
        ],
    }  # fmt: skip

    result = runflow(cli, write_flow(tmp_path, flow))

    assert result.code == 1
    fake_api.wait_finished()
    assert len(fake_api.requests("post")) == 1
    step = StepResult.objects.get()
    assert (step.status, step.attempts) == ("failed", 1)
    assert step.error["type"] == "outcome_unknown"
    assert step.error["retryable"] is False
    assert "restart from this step" in step.error["message"]
