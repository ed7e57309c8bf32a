"""Outcome writes through transient database errors (runs/engine/db_retry.py).

The write of a finished call's outcome fails once, as when the database connection
broke; the task (or the in-process driver) that made the call records it on a new
connection, so the call is neither lost nor made again.
"""

from __future__ import annotations

import pytest
from django.db import OperationalError

from runs.engine import checkpoint, local
from runs.engine.celery import settle as celery_settle
from runs.engine.celery.run import run_start
from runs.engine.db_retry import with_db_retries
from runs.models import Run
from runs.services import run_create, run_execute
from tests.celery_support import Bus, import_flow
from tests.conftest import results_of

pytestmark = pytest.mark.django_db(transaction=True)


def post_flow() -> dict:
    return {
        "name": "post_once",
        "steps": [
            {
                "id": "post",
                "kind": "tool",
                "tool": "slow_sink",
                "input_mapping": {"tag": "blip", "delay": 0},
            }
        ],
        "outputs": {"received": "post.received"},
    }


def failing_once(monkeypatch, module, name: str) -> list[int]:
    """Make ``module.name`` raise OperationalError on its first call only."""
    real = getattr(module, name)
    calls: list[int] = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OperationalError("server closed the connection unexpectedly")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    return calls


def test_a_celery_step_records_its_outcome_after_a_database_error(echo_api, monkeypatch):
    calls = failing_once(monkeypatch, celery_settle, "_write_outcome")
    run = run_create(workflow=import_flow(post_flow()), trigger="api", inputs={})
    bus = Bus()
    run_start(run=run, publish=bus)

    bus.drain()

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"received": True}
    assert len(calls) == 2
    assert len(echo_api.requests("sink")) == 1
    assert [e["status"] for e in results_of(run)["post"].attempt_log] == ["succeeded"]


def test_the_in_process_driver_records_its_outcome_after_a_database_error(echo_api, monkeypatch):
    calls = failing_once(monkeypatch, checkpoint, "mark_finished")
    run = run_create(workflow=import_flow(post_flow()), trigger="api", inputs={})

    run = run_execute(run=run)

    assert run.status == "succeeded", run.error_summary
    assert len(calls) == 2
    assert len(echo_api.requests("sink")) == 1


def test_a_turn_broken_after_the_outcome_is_written_again_whole(echo_api, monkeypatch):
    """The claim of the next step fails after the outcome was written in the same turn:
    both roll back, the rows' in-memory copies are restored, and the turn is written
    again with the same decisions — the outcome once, each call made once."""
    flow = post_flow()
    flow["steps"].append(
        {"id": "after", "kind": "transform", "expression": "{r: r}",
         "input_mapping": {"r": "post.received"}}
    )  # fmt: skip
    flow["outputs"] = {"received": "after.r"}
    real = checkpoint.mark_running
    claims: list[str] = []

    def flaky(ctx, result, **kwargs):
        claims.append(result.step_id)
        if claims.count("after") == 1 and result.step_id == "after":
            raise OperationalError("server closed the connection unexpectedly")
        return real(ctx, result, **kwargs)

    monkeypatch.setattr(checkpoint, "mark_running", flaky)
    run = run_create(workflow=import_flow(flow), trigger="api", inputs={})

    run = run_execute(run=run)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"received": True}
    assert claims == ["post", "after", "after"]
    assert len(echo_api.requests("sink")) == 1
    post = results_of(run)["post"]
    assert (post.attempts, [e["status"] for e in post.attempt_log]) == (1, ["succeeded"])


def test_retries_are_bounded_and_the_last_error_is_raised():
    waits: list[float] = []

    def broken():
        raise OperationalError("down")

    with pytest.raises(OperationalError, match="down"):
        with_db_retries(broken, what="test", tries=4, sleep=waits.append)
    assert waits == [0.1, 0.2, 0.4]


def test_a_turn_committed_but_unacknowledged_is_recognised_when_sent_again(echo_api, monkeypatch):
    """The turn's write (the outcome of `post`, the claim of `after`) commits, then the
    connection breaks before the driver hears so: the try again finds its own write in
    place and carries on — the run succeeds, each call made once, no outcome twice."""
    flow = post_flow()
    flow["steps"].append(
        {"id": "after", "kind": "tool", "tool": "slow_sink",
         "input_mapping": {"tag": "post.tag", "delay": 0}}
    )  # fmt: skip
    flow["outputs"] = {"received": "after.received"}
    real = local.rows_write
    sent: list[list[int]] = []

    def lost_acknowledgement(writes, *, required=0):
        counts = real(writes, required=required)
        sent.append(counts)
        if required and len(sent) == 2:  # the turn of `post`'s outcome, once
            raise OperationalError("server closed the connection unexpectedly")
        return counts

    monkeypatch.setattr(local, "rows_write", lost_acknowledgement)
    run = run_create(workflow=import_flow(flow), trigger="api", inputs={})

    run = run_execute(run=run)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"received": True}
    # the start with the first claim; the turn of `post` twice (committed, then
    # recognised); `after`'s outcome with the finish
    assert sent == [[1, 1], [1, 1], [1, 1], [1, 1]]
    assert len(echo_api.requests("sink")) == 2
    results = results_of(run)
    for step_id in ("post", "after"):
        result = results[step_id]
        assert (result.status, result.attempts) == ("succeeded", 1)
        assert [e["status"] for e in result.attempt_log] == ["succeeded"]


HEARD: list[int] = []


def heard(*, run_id: int, **context) -> None:
    """A run-finished hook: which runs were announced, in order."""
    HEARD.append(run_id)


def lost_once(monkeypatch, which) -> list[list[int]]:
    """Make the in-process driver's ``rows_write`` lose the acknowledgement of the first
    batch ``which(writes)`` picks: the batch commits, then the connection breaks."""
    real = local.rows_write
    sent: list[list[int]] = []
    lost: list[bool] = []

    def lost_acknowledgement(writes, *, required=0):
        counts = real(writes, required=required)
        sent.append(counts)
        if not lost and which(writes):
            lost.append(True)
            raise OperationalError("server closed the connection unexpectedly")
        return counts

    monkeypatch.setattr(local, "rows_write", lost_acknowledgement)
    return sent


def test_a_first_turn_committed_but_unacknowledged_is_recognised_when_sent_again(
    echo_api, monkeypatch, settings
):
    """The first turn is the run's start and its first claim: committed, then the
    connection breaks; the try again finds both in place and the run goes on — it is
    not refused as started by someone else, the call is made once."""
    settings.FLOWPILOT_RUN_FINISHED_HOOKS = [f"{__name__}.heard"]
    HEARD.clear()
    sent = lost_once(monkeypatch, lambda writes: isinstance(writes[0].instance, Run))
    run = run_create(workflow=import_flow(post_flow()), trigger="api", inputs={})

    run = run_execute(run=run)

    assert run.status == "succeeded", run.error_summary
    assert sent[:2] == [[1, 1], [1, 1]]  # the start and the claim, twice
    assert len(echo_api.requests("sink")) == 1
    assert [run.pk] == HEARD


def test_a_last_turn_committed_but_unacknowledged_is_recognised_when_sent_again(
    echo_api, monkeypatch, settings
):
    """The last turn is the step's outcome and the run's finish: committed, then the
    connection breaks; the try again finds both in place — the run succeeded, announced
    once, its call made once."""
    settings.FLOWPILOT_RUN_FINISHED_HOOKS = [f"{__name__}.heard"]
    HEARD.clear()
    sent = lost_once(
        monkeypatch,
        lambda writes: (
            isinstance(writes[-1].instance, Run)
            and len(writes) > 1
            and not isinstance(writes[0].instance, Run)
        ),
    )
    run = run_create(workflow=import_flow(post_flow()), trigger="api", inputs={})

    run = run_execute(run=run)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"received": True}
    assert sent[1:] == [[1, 1], [1, 1]]  # the outcome and the finish, twice
    assert len(echo_api.requests("sink")) == 1
    assert [run.pk] == HEARD
    stored = Run.objects.get(pk=run.pk)
    assert (stored.status, stored.finished_at) == ("succeeded", run.finished_at)
