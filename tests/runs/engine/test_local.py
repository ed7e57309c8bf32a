"""The in-process driver (runs/engine/local.py) via ``run_execute``: cancel, resume, failures."""

from __future__ import annotations

import threading
import time

import pytest
from django.db import connection

from runs.engine import checkpoint as checkpoint_module
from runs.engine.build import build_run_context
from runs.models import Run
from runs.services import run_cancel, run_create, run_execute
from tests.conftest import import_example, statuses
from workflows.services import workflow_import, workflow_spec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("example_tools")]


def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def execute_in_thread(run: Run) -> threading.Thread:
    """Start ``run_execute`` on a thread of its own (its own database connection)."""

    def execute() -> None:
        try:
            run_execute(run=Run.objects.get(pk=run.pk))
        finally:
            connection.close()

    worker = threading.Thread(target=execute)
    worker.start()
    return worker


def test_cancel_records_every_step_in_flight_not_only_the_first_to_finish(fake_api):
    """Two parallel steps in flight at cancel: both finish, and both outcomes are recorded."""
    run = run_create(workflow=import_example("geo_weather"), trigger="api")
    fake_api.delay("weather", 0.3)
    fake_api.delay("restcountries", 1.0)

    worker = execute_in_thread(run)
    wait_for(lambda: fake_api.requests("weather") and fake_api.requests("restcountries"))
    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True
    worker.join(timeout=60)

    assert not worker.is_alive()
    run.refresh_from_db()
    assert run.status == "cancelled"
    # Neither is left "running" forever (a resume would call it again, or fail it for review).
    assert statuses(run) == {"country": "succeeded", "locate": "succeeded", "weather": "succeeded"}


def test_cancel_leaves_no_step_running_when_one_waited_for_a_free_thread(fake_api, settings):
    settings.FLOWPILOT_MAX_PARALLEL_STEPS = 1  # `weather` waits while `country` runs
    run = run_create(workflow=import_example("geo_weather"), trigger="api")
    fake_api.delay("restcountries", 0.5)

    worker = execute_in_thread(run)
    wait_for(lambda: fake_api.requests("restcountries"))
    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True
    worker.join(timeout=60)

    run.refresh_from_db()
    assert run.status == "cancelled"
    # The pool's thread may take `weather` before the cancel is seen; then it finishes.
    expected = "succeeded" if fake_api.requests("weather") else "skipped"
    assert statuses(run) == {"country": "succeeded", "locate": "succeeded", "weather": expected}


def test_a_run_whose_context_cannot_be_built_fails_instead_of_staying_running(
    output_dir, monkeypatch
):
    from django.db import OperationalError

    from runs.engine import caches

    # A fresh instance, as a run executed apart from its creation: run_create's own
    # instance carries the registry it validated against, and reads no tool state.
    run = Run.objects.get(pk=run_create(workflow=import_example("sales_report"), trigger="api").pk)

    def unavailable():
        raise OperationalError("database is locked")

    monkeypatch.setattr(caches, "tools_state", unavailable)  # the context's first query
    with pytest.raises(OperationalError):
        run_execute(run=run)

    run.refresh_from_db()
    assert run.status == "failed"
    assert run.finished_at is not None
    assert "database is locked" in run.error_summary


def test_resume_waits_until_the_steps_in_flight_of_a_cancelled_run_have_finished(fake_api):
    """Cancel lets a step in flight finish; resuming meanwhile must not call it a second time."""
    from runs.services import RunStateError, run_prepare_resume

    run = run_create(workflow=import_example("geo_weather"), trigger="api")
    release = fake_api.hold("restcountries")  # in flight until let go, however slow the machine

    worker = execute_in_thread(run)
    wait_for(lambda: fake_api.requests("restcountries"))
    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True

    with pytest.raises(RunStateError, match=r"cancelled, but steps? .*`country`.* still"):
        run_prepare_resume(run=Run.objects.get(pk=run.pk))
    assert statuses(run)["country"] == "running"

    release.set()
    worker.join(timeout=60)
    assert not worker.is_alive()
    prepared = run_prepare_resume(run=Run.objects.get(pk=run.pk))
    done = run_execute(run=prepared)
    assert done.status == "succeeded"
    assert len(fake_api.requests("restcountries")) == 1  # never called twice


def test_an_error_message_quoting_a_huge_argument_is_stored_capped(fake_api):
    """jsonschema quotes the offending value: a 50,000-item list must not fill the checkpoint."""
    data = {
        "name": "big_error",
        "inputs": {"batch": {"type": "object"}},
        "steps": [
            {
                "id": "locate",
                "kind": "tool",
                "tool": "ip_geolocate",
                "input_mapping": {"ip": "$input.batch.ids"},  # a path: typed only at run time
            }
        ],
    }
    workflow, _ = workflow_import(data=data)
    ids = [f"10.0.0.{i % 250}" for i in range(50_000)]

    inputs = {"batch": {"ids": ids}}
    run = run_execute(run=run_create(workflow=workflow, trigger="api", inputs=inputs))

    result = run.step_results.get()
    assert run.status == "failed"
    assert result.error["type"] == "tool_input_invalid"
    assert result.error["message"].startswith("tool 'ip_geolocate': invalid arguments: $.ip: [")
    assert "characters in all]" in result.error["message"]
    assert len(result.error["message"]) < 5_000
    assert len(str(result.attempt_log)) < 6_000


def test_an_engine_error_summary_is_capped(output_dir, monkeypatch):
    from django.db import OperationalError

    from runs.engine import caches

    # A fresh instance, as a run executed apart from its creation: run_create's own
    # instance carries the registry it validated against, and reads no tool state.
    run = Run.objects.get(pk=run_create(workflow=import_example("sales_report"), trigger="api").pk)

    def unavailable():
        raise OperationalError("x" * 100_000)

    monkeypatch.setattr(caches, "tools_state", unavailable)
    with pytest.raises(OperationalError):
        run_execute(run=run)

    run.refresh_from_db()
    assert run.status == "failed"
    assert run.error_summary.startswith("engine error: OperationalError: xxx")
    assert len(run.error_summary) <= 5_000


def test_each_foreach_item_call_sends_its_own_idempotency_key(fake_api):
    """One key for N different POSTs would let the server drop items 2..N as replays."""
    data = {
        "name": "notify_each",
        "inputs": {"events": {"type": "array"}},
        "steps": [
            {
                "id": "notify",
                "kind": "foreach",
                "tool": "post_json",
                "input_mapping": {"items": "$input.events"},
                "item_mapping": {"payload": "$item"},
                "concurrency": 1,
            }
        ],
    }
    workflow, _ = workflow_import(data=data)
    events = [{"n": 1}, {"n": 2}, {"n": 3}]

    run = run_execute(run=run_create(workflow=workflow, trigger="api", inputs={"events": events}))

    assert run.status == "succeeded"
    keys = [r.headers["idempotency-key"] for r in fake_api.requests("post")]
    assert len(keys) == 3
    assert len(set(keys)) == 3, keys
    assert sorted(keys) == [f"{run.uuid}:notify:{i}" for i in range(3)]


def test_a_step_skipped_by_a_cancel_is_never_started_by_the_in_process_driver(fake_api):
    """The driver checks for a cancel at most every 0.2 s; the claim closes that window."""
    workflow = import_example("geo_weather")
    run = run_create(workflow=workflow, trigger="api")
    run.status = "running"
    run.save(update_fields=["status"])
    run_cancel(run=run)  # every pending step is now skipped
    result = run.step_results.get(step_id="locate")

    with build_run_context(run_id=run.pk, spec=workflow_spec(workflow)) as ctx:
        claimed = checkpoint_module.mark_running(ctx, result, inputs_record={})

    assert claimed is False
    assert result.status == "skipped"
    assert fake_api.requests() == []


def test_a_run_executed_right_after_its_creation_uses_the_registry_it_was_validated_with(
    output_dir, monkeypatch
):
    from runs.engine import caches

    run = run_create(workflow=import_example("sales_report"), trigger="api")

    def unread():
        raise AssertionError("the tool table's state was read again")

    monkeypatch.setattr(caches, "tools_state", unread)
    assert run_execute(run=run).status == "succeeded"


def test_an_outcome_another_process_took_away_fails_the_run_and_frees_nothing():
    """The step's row was moved while its call ran (two drivers on one run): its outcome
    cannot be recorded, so none of what the turn decided from it is written either (the
    next step is not claimed), and the run fails naming the step."""
    from runs.models import StepResult
    from runs.state import RunStateError

    steps = [
        {"id": "a", "kind": "transform", "expression": "{n: `1`}"},
        {"id": "b", "kind": "transform", "expression": "n", "input_mapping": {"n": "a.n"}},
    ]
    workflow, _ = workflow_import(data={"name": "taken_away", "steps": steps})
    run = run_create(workflow=workflow, trigger="cli")

    def observer(event: str, result) -> None:
        if event == "started" and result.step_id == "a":  # the other process resets it
            StepResult.objects.filter(pk=result.pk).update(status="pending")

    with pytest.raises(RunStateError, match="step `a` could not be recorded"):
        run_execute(run=run, observer=observer)

    run.refresh_from_db()
    assert run.status == "failed"
    assert "step `a` could not be recorded" in run.error_summary
    assert statuses(run) == {"a": "pending", "b": "pending"}


def test_a_lone_step_is_called_on_the_driving_thread_and_steps_side_by_side_on_the_pool(
    fake_api, monkeypatch
):
    """`locate` starts alone (nothing could overlap it): the driver calls it itself, with
    no hand-off to a pool thread. `country` and `weather` start together after it: each
    on a pool thread of the run."""
    from runs.engine import local

    threads: dict[str, str] = {}
    real = local.run_with_retries

    def recording(ctx, step, args, **kwargs):
        threads[step.id] = threading.current_thread().name
        return real(ctx, step, args, **kwargs)

    monkeypatch.setattr(local, "run_with_retries", recording)
    run = run_create(workflow=import_example("geo_weather"), trigger="api")

    assert run_execute(run=run).status == "succeeded"
    assert threads["locate"] == threading.current_thread().name
    assert threads["country"].startswith(f"run{run.pk}_")
    assert threads["weather"].startswith(f"run{run.pk}_")
    assert statuses(run) == {"country": "succeeded", "locate": "succeeded", "weather": "succeeded"}
