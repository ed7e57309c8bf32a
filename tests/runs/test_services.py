"""Run services: create, execute, cancel, prepare a resume — the rules, without the commands."""

from __future__ import annotations

import random
import threading

import pytest
from django.db import connection

from runs.engine.build import build_run_context
from runs.models import Run, StepResult
from runs.services import (
    RunStateError,
    run_cancel,
    run_create,
    run_execute,
    run_prepare_resume,
)
from tests.conftest import EXAMPLES_DIR, import_example, statuses
from tests.fakes.apis import IP_RECORDS
from workflows.files import read_workflow_file
from workflows.inputs import InputsInvalid
from workflows.services import workflow_import, workflow_spec
from workflows.validator import WorkflowInvalid

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("example_tools")]


# --- run_create -------------------------------------------------------------------------


def test_run_create_records_a_pending_run_and_a_pending_result_per_step():
    workflow = import_example("sales_report")

    run = run_create(workflow=workflow, trigger="api", inputs={"top": 2})

    assert run.status == "pending"
    assert run.trigger == "api"
    assert run.workflow == workflow
    assert run.definition_hash == workflow.definition_hash
    assert run.inputs == {
        "csv_path": "data/sales.csv",
        "top": 2,
        "report_path": "sales_report.html",
    }
    assert statuses(run) == dict.fromkeys(
        ["by_region", "load", "report", "top_products"], "pending"
    )
    assert set(run.step_results.values_list("attempts", flat=True)) == {0}


def test_run_create_refuses_an_invalid_version_naming_every_problem():
    data = read_workflow_file(EXAMPLES_DIR / "geo_weather.yaml")
    data["steps"][0]["tool"] = "no_such_tool"
    data["steps"][2]["input_mapping"] = {"code": "$input.country"}
    workflow, _ = workflow_import(data=data)

    with pytest.raises(WorkflowInvalid) as caught:
        run_create(workflow=workflow, trigger="cli", inputs={})

    codes = {issue.code for issue in caught.value.report.errors}
    assert {"unknown_tool", "unknown_input"} <= codes
    assert Run.objects.count() == 0


def test_run_create_lists_every_input_problem_at_once():
    workflow = import_example("github_intel")

    with pytest.raises(InputsInvalid) as caught:
        run_create(
            workflow=workflow,
            trigger="cli",
            inputs={"owner": 5, "per_page": "ten", "branch": "main"},
        )

    assert caught.value.problems == [
        "unknown input `branch` (declared: owner, per_page, repo)",
        "input `owner` must be string, got 5",
        'input `per_page` must be integer, got "ten"',
    ]
    assert Run.objects.count() == 0


# --- run_execute --------------------------------------------------------------------------


def test_run_execute_runs_every_step_and_tells_the_observer(output_dir):
    run = run_create(workflow=import_example("sales_report"), trigger="api")
    events: list[tuple[str, str]] = []

    done = run_execute(
        run=run, observer=lambda event, result: events.append((event, result.step_id))
    )

    assert done.status == "succeeded"
    assert done.started_at <= done.finished_at
    assert done.error_summary == ""
    assert set(statuses(done).values()) == {"succeeded"}
    for step_id in ("load", "by_region", "top_products", "report"):
        assert events.index(("started", step_id)) < events.index(("succeeded", step_id))
    assert events.index(("succeeded", "load")) < events.index(("started", "by_region"))
    assert events[-1] == ("succeeded", "report")


def test_run_execute_refuses_a_run_that_already_finished(output_dir):
    run = run_execute(run=run_create(workflow=import_example("sales_report"), trigger="api"))

    with pytest.raises(RunStateError, match=rf"run {run.pk} is succeeded; it cannot start"):
        run_execute(run=run)


def test_a_new_run_started_elsewhere_meanwhile_is_refused_and_left_alone(output_dir):
    """A run just created starts with its first claims: when its start does not land
    (another process started it first), nothing of it is written — no claim, and the run
    is not failed under the other process."""
    from runs.state import RunNotStarted

    run = run_create(workflow=import_example("sales_report"), trigger="api")
    Run.objects.filter(pk=run.pk).update(status="running")  # the other process's start

    with pytest.raises(RunNotStarted, match=rf"run {run.pk} is running; it cannot start"):
        run_execute(run=run)

    assert Run.objects.get(pk=run.pk).status == "running"
    assert set(statuses(run).values()) == {"pending"}


def test_a_new_run_whose_context_cannot_be_built_fails_before_it_starts(monkeypatch):
    """Nothing is claimed before the context exists: the run, still pending, is failed
    with the engine error, and its steps never started."""
    from runs import services

    def broken(**kwargs):
        raise RuntimeError("no context today")

    monkeypatch.setattr(services, "build_run_context", broken)
    run = run_create(workflow=import_example("sales_report"), trigger="api")

    with pytest.raises(RuntimeError, match="no context today"):
        run_execute(run=run)

    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error_summary == "engine error: RuntimeError: no context today"
    assert set(statuses(run).values()) == {"pending"}


def test_retries_wait_with_the_injected_sleep_and_random(fake_api):
    data = read_workflow_file(EXAMPLES_DIR / "geo_weather.yaml")
    data["steps"][0]["retry"] = {
        "max_attempts": 4,
        "initial_delay": 1,
        "multiplier": 3,
        "max_delay": 5,
        "jitter": 0,
    }
    workflow, _ = workflow_import(data=data)
    run = run_create(workflow=workflow, trigger="api")
    fake_api.fail("ipapi", status=503, times=3)
    slept: list[float] = []

    with build_run_context(
        run_id=run.pk, spec=workflow_spec(workflow), sleep=slept.append, rand=random.Random(7)
    ) as ctx:
        done = run_execute(run=run, context=ctx)

    assert done.status == "succeeded"
    assert slept == [1.0, 3.0, 5.0]  # exponential, capped at max_delay, no jitter
    locate = done.step_results.get(step_id="locate")
    assert locate.attempts == 4
    assert [a.get("retry_in") for a in locate.attempt_log] == [1.0, 3.0, 5.0, None]


def test_without_declared_outputs_the_run_outputs_are_the_sink_steps(fake_api):
    workflow = import_example("geo_weather", outputs={})
    run = run_execute(run=run_create(workflow=workflow, trigger="api"))

    assert run.status == "succeeded"
    assert set(run.outputs) == {"country", "weather"}
    assert run.outputs["country"]["name"] == "United States"
    assert set(run.outputs["weather"]) == {"temperature", "windspeed", "weathercode"}


def test_a_validation_run_stores_its_recorded_calls_before_it_is_seen_finished(
    fake_api, monkeypatch
):
    # A replay may start as soon as the run is seen finished: every call the run made
    # must be stored by then, not when its context closes after the finish.
    from runs import services
    from runs.models import ToolCallRecording

    real_finish = services.run_finish
    stored_at_finish: list[list[str]] = []

    def finish(ctx, finishing, *args, **kwargs):
        recorded = ToolCallRecording.objects.filter(step_result__run_id=finishing.pk)
        stored_at_finish.append(sorted(recorded.values_list("step_result__step_id", flat=True)))
        return real_finish(ctx, finishing, *args, **kwargs)

    monkeypatch.setattr(services, "run_finish", finish)
    run = run_execute(run=run_create(workflow=import_example("geo_weather"), trigger="validation"))

    assert run.status == "succeeded", run.error_summary
    calls = sorted(
        ToolCallRecording.objects.filter(step_result__run=run).values_list(
            "step_result__step_id", flat=True
        )
    )
    assert calls  # the example's HTTP calls were recorded
    assert stored_at_finish == [calls]  # all of them, before the finish; once each


def test_an_output_over_the_stored_cap_is_kept_as_a_flagged_preview(fake_api, settings):
    settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES = 64
    run = run_execute(run=run_create(workflow=import_example("geo_weather"), trigger="api"))

    assert run.status == "succeeded"
    country = run.step_results.get(step_id="country")
    assert country.output_truncated is True
    assert country.output["_truncated"] is True
    assert country.output["_stored_limit_bytes"] == 64
    assert country.output["preview"].startswith('{"name": "United States"')


def test_run_outputs_read_the_values_downstream_steps_saw_not_the_stored_preview(
    fake_api, settings
):
    settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES = 64
    workflow = import_example("geo_weather", outputs={"city": "locate.city"})

    run = run_execute(run=run_create(workflow=workflow, trigger="api"))

    assert run.step_results.get(step_id="locate").output_truncated is True
    assert fake_api.requests("weather")[0].arg("latitude") == "39.03"  # downstream got it
    assert run.outputs == {"city": "Ashburn"}


def test_two_runs_of_one_workflow_at_once_do_not_interfere(fake_api):
    if connection.vendor != "postgresql":
        # pytest-django's SQLite test database is in memory with a shared cache, whose
        # table locks fail a second writer at once (SQLITE_LOCKED) instead of waiting
        # as the WAL file database of the embedded default does.
        pytest.skip("concurrent writers from two threads need PostgreSQL in tests")
    workflow = import_example("geo_weather")
    fake_api.delay("ipapi", 0.2)
    fake_api.delay("weather", 0.2)
    ips = ["8.8.8.8", "81.2.69.142"]
    runs = [run_create(workflow=workflow, trigger="api", inputs={"ip": ip}) for ip in ips]
    errors: list[BaseException] = []

    def execute(run: Run) -> None:
        try:
            run_execute(run=run)
        except BaseException as exc:  # shown by the assertion below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=execute, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)

    assert errors == []
    first, second = fake_api.requests("ipapi")
    assert first.overlaps(second)  # really at the same time
    for run, ip in zip(runs, ips, strict=True):
        run.refresh_from_db()
        assert run.status == "succeeded"
        assert run.outputs["city"] == IP_RECORDS[ip]["city"]
        assert run.outputs["latitude"] == IP_RECORDS[ip]["lat"]
        assert run.step_results.get(step_id="locate").inputs == {"ip": ip}


# --- run_cancel ---------------------------------------------------------------------------


def test_cancelling_a_pending_run_skips_its_steps_and_it_never_starts():
    run = run_create(workflow=import_example("sales_report"), trigger="api")

    assert run_cancel(run=run) is True
    assert run_cancel(run=run) is False  # already cancelled

    run.refresh_from_db()
    assert run.status == "cancelled"
    assert run.finished_at is not None
    assert set(statuses(run).values()) == {"skipped"}
    with pytest.raises(RunStateError, match="is cancelled; it cannot start"):
        run_execute(run=run)


def test_a_finished_run_cannot_be_cancelled(output_dir):
    run = run_execute(run=run_create(workflow=import_example("sales_report"), trigger="api"))

    assert run_cancel(run=run) is False
    run.refresh_from_db()
    assert run.status == "succeeded"


# --- run_prepare_resume -------------------------------------------------------------------


def crashed_briefing(fake_api, **step_statuses) -> Run:
    """A travel_briefing run that succeeded, then doctored to look like its process died."""
    run = run_execute(run=run_create(workflow=import_example("travel_briefing"), trigger="api"))
    assert run.status == "succeeded"
    Run.objects.filter(pk=run.pk).update(status="running", finished_at=None, outputs=None)
    for step_id, status in step_statuses.items():
        StepResult.objects.filter(run=run, step_id=step_id).update(status=status)
    fake_api.clear()
    run.refresh_from_db()
    return run


def test_resume_refuses_succeeded_and_running_runs_without_force(fake_api):
    run = run_execute(run=run_create(workflow=import_example("geo_weather"), trigger="api"))

    with pytest.raises(RunStateError, match="only failed or cancelled runs resume"):
        run_prepare_resume(run=run)
    Run.objects.filter(pk=run.pk).update(status="running")
    with pytest.raises(RunStateError, match=r"use --force if the process running it died"):
        run_prepare_resume(run=run)


def test_resume_reruns_an_interrupted_idempotent_step_and_keeps_the_rest(fake_api):
    run = crashed_briefing(fake_api, weather="running", briefing="pending")

    prepared = run_prepare_resume(run=run, force=True)

    assert prepared.status == "pending"
    assert statuses(prepared) == {
        "briefing": "pending",
        "country": "succeeded",
        "exchange": "succeeded",
        "place": "succeeded",
        "weather": "pending",
    }
    done = run_execute(run=prepared)
    assert done.status == "succeeded"
    assert [r.route for r in fake_api.requests()] == ["weather", "post"]
    assert done.outputs["city"] == "Berlin"


def test_resume_never_repeats_an_interrupted_non_idempotent_call(fake_api):
    run = crashed_briefing(fake_api, briefing="running")

    prepared = run_prepare_resume(run=run, force=True)

    briefing = prepared.step_results.get(step_id="briefing")
    assert briefing.status == "failed"
    assert briefing.error["type"] == "interrupted_non_idempotent"
    assert "was not repeated" in briefing.error["message"]
    done = run_execute(run=prepared)
    assert done.status == "failed"
    assert "interrupted_non_idempotent" in done.error_summary
    assert fake_api.requests() == []  # the POST was not sent again


def test_resume_of_a_failed_run_resets_failed_and_skipped_steps(fake_api):
    fake_api.fail("ipapi", status=404)
    run = run_execute(run=run_create(workflow=import_example("geo_weather"), trigger="api"))
    assert statuses(run) == {"country": "skipped", "locate": "failed", "weather": "skipped"}
    assert run.status == "failed"

    prepared = run_prepare_resume(run=run)

    assert prepared.status == "pending"
    assert prepared.error_summary == ""
    assert set(statuses(prepared).values()) == {"pending"}
    fake_api.heal()
    done = run_execute(run=prepared)
    assert done.status == "succeeded"
    assert done.step_results.get(step_id="locate").attempts == 2


def test_resume_keeps_a_failure_under_on_error_continue(fake_api):
    data = read_workflow_file(EXAMPLES_DIR / "geo_weather.yaml")
    data["steps"][2]["on_error"] = "continue"
    data["outputs"] = {"city": "locate.city", "country_error": "country.error.type"}
    workflow, _ = workflow_import(data=data)
    fake_api.fail("restcountries", status=404)
    run = run_execute(run=run_create(workflow=workflow, trigger="api"))
    assert run.status == "succeeded"
    assert run.outputs == {"city": "Ashburn", "country_error": "http_error"}
    Run.objects.filter(pk=run.pk).update(status="failed")

    prepared = run_prepare_resume(run=run)

    assert statuses(prepared)["country"] == "failed"


def test_a_cancelled_run_can_be_resumed_and_completes(output_dir):
    run = run_create(workflow=import_example("sales_report"), trigger="api")
    run_cancel(run=run)

    prepared = run_prepare_resume(run=Run.objects.get(pk=run.pk))
    done = run_execute(run=prepared)

    assert done.status == "succeeded"
    assert set(statuses(done).values()) == {"succeeded"}
    assert (output_dir / "sales_report.html").is_file()
