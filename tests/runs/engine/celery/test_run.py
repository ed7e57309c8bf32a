"""A Celery run on the driver, in process (``runs.engine.celery.run``): start, drain, joins,
decisions, cancel.

A ``Bus`` stands in for the broker: it records what the services publish and
delivers it to ``step_execute`` the way a worker would. Real workers on Redis are
in ``tests/runs/test_celery_workers.py``; these run on both databases.
"""

from __future__ import annotations

import pytest
from django.utils import timezone

from runs.engine.celery import claim as celery_claim
from runs.engine.celery import step as celery_step
from runs.models import Run
from runs.services import run_cancel
from tests.celery_support import fan_out_flow
from tests.runs.engine.celery.conftest import WORKER, by_id, results, started

pytestmark = pytest.mark.django_db(transaction=True)


# --- start and drain ------------------------------------------------------------------


def test_run_start_queues_the_ready_steps_and_publishes_one_message_each(echo_api):
    run, bus = started(fan_out_flow("fan", 3))

    rows = results(run)
    run.refresh_from_db()
    assert run.status == "running"
    assert {sid: r.status for sid, r in rows.items()} == {
        "join": "pending",
        "s01": "queued",
        "s02": "queued",
        "s03": "queued",
    }
    names = by_id(run)
    assert sorted(names[m.step_result_id] for m in bus.published) == ["s01", "s02", "s03"]
    for sid in ("s01", "s02", "s03"):
        assert rows[sid].attempt_limit == 3  # the echo tool's policy
        assert rows[sid].lease_expires_at > timezone.now()
    assert echo_api.requests() == []  # nothing runs before a worker takes it


def test_draining_runs_every_step_once_and_logs_the_worker_of_each_attempt(echo_api):
    run, bus = started(fan_out_flow("fan", 3), tag="alpha")

    verdicts = bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"tags": ["alpha"] * 3, "first": "n01"}
    assert [v.status for v in verdicts] == ["succeeded"] * 4
    for row in results(run).values():
        assert row.status == "succeeded"
        assert row.attempts == 1
        assert [e["worker"] for e in row.attempt_log] == [WORKER]
        assert row.worker == WORKER
    assert sorted(r.path for r in echo_api.requests("echo")) == [
        "/echo/alpha/n01",
        "/echo/alpha/n02",
        "/echo/alpha/n03",
    ]
    assert results(run)["s02"].inputs == {"tag": "alpha", "name": "n02", "delay": 0.0}


def test_the_join_is_queued_only_when_its_last_parent_finishes(echo_api):
    run, bus = started(fan_out_flow("fan", 2))
    first, second = bus.messages[:2]
    bus.messages.clear()

    celery_step.step_execute(step_result_id=first.step_result_id, worker=WORKER, publish=bus)
    assert bus.messages == []
    assert results(run)["join"].status == "pending"
    verdict = celery_step.step_execute(
        step_result_id=second.step_result_id, worker=WORKER, publish=bus
    )

    # The join, the one step the last parent made ready, runs in that parent's task.
    assert bus.messages == []
    assert [v.status for v in verdict.continued] == ["succeeded"]
    assert results(run)["join"].status == "succeeded"
    run.refresh_from_db()
    assert run.status == "succeeded"


def branch_flow() -> dict:
    """``pick`` decides on the tag; only the chosen branch calls out."""

    def echo(sid: str) -> dict:
        return {
            "id": sid,
            "kind": "tool",
            "tool": "echo",
            "input_mapping": {"tag": "$input.tag", "name": sid, "delay": 0},
        }

    return {
        "name": "branchy",
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {
                "id": "pick",
                "kind": "decision",
                "branches": ["left", "right"],
                "input_mapping": {"tag": "$input.tag"},
                "conditions": {"left": "tag == 'alpha'"},
                "default": "right",
            },
            echo("go_left"),
            echo("go_right"),
        ],
        "edges": [
            {"from": "pick", "to": "go_left", "when": "left"},
            {"from": "pick", "to": "go_right", "when": "right"},
        ],
    }


@pytest.mark.parametrize(
    ("tag", "taken", "skipped"), [("alpha", "go_left", "go_right"), ("beta", "go_right", "go_left")]
)
def test_a_decision_queues_only_the_branch_it_took(echo_api, tag, taken, skipped):
    run, bus = started(branch_flow(), tag=tag)

    bus.drain(worker=WORKER)

    run.refresh_from_db()
    rows = results(run)
    assert run.status == "succeeded", run.error_summary
    assert rows[taken].status == "succeeded"
    assert rows[skipped].status == "skipped"
    assert [r.path for r in echo_api.requests("echo")] == [f"/echo/{tag}/{taken}"]


# --- cancel ---------------------------------------------------------------------------


def test_cancel_skips_queued_steps_so_their_messages_never_start(echo_api):
    run, bus = started(fan_out_flow("fan", 3))

    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True
    verdicts = bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "cancelled"
    assert [v.claimed for v in verdicts] == [False, False, False]
    assert {r.status for r in results(run).values()} == {"skipped"}
    assert echo_api.requests() == []


def test_a_step_in_flight_when_the_run_is_cancelled_finishes_and_nothing_follows(echo_api):
    run, bus = started(fan_out_flow("fan", 1))
    message = bus.messages.pop(0)
    token = celery_claim.claim_step(message.step_result_id, worker=WORKER)
    assert token
    assert run_cancel(run=Run.objects.get(pk=run.pk)) is True

    verdict = celery_step.step_execute(
        step_result_id=message.step_result_id, worker=WORKER, publish=bus
    )

    assert verdict.claimed is False  # the running step was not claimable twice
    rows = results(run)
    assert rows["s01"].status == "running"
    assert rows["join"].status == "skipped"


# --- a task's first read -------------------------------------------------------------


def test_read_step_reads_the_step_its_run_and_the_tool_tables_state_as_the_orm_does(echo_api):
    """One precompiled statement; the values converted as the ORM converts them (JSON
    inputs, aware datetimes, the UUID), the tool table's state as ``tools_state``."""
    from runs.engine import caches
    from runs.engine.celery.run import read_step
    from runs.models import StepResult

    _, bus = started(fan_out_flow("read", 2), tag="beta")
    pk = bus.published[0].step_result_id
    result, tools = read_step(pk)

    expected = StepResult.objects.select_related("run").get(pk=pk)
    assert (result.pk, result.run_id, result.step_id, result.status) == (
        expected.pk,
        expected.run_id,
        expected.step_id,
        "queued",
    )
    for field in Run._meta.concrete_fields:
        assert getattr(result.run, field.attname) == getattr(expected.run, field.attname)
    assert result.run.inputs == {"tag": "beta"}
    assert result.run.started_at is not None
    assert result.run.started_at.tzinfo is not None
    assert tools == caches.tools_state()
    with pytest.raises(StepResult.DoesNotExist):
        read_step(pk + 10_000)


def test_claim_read_claims_a_queued_step_once_and_reads_its_run_as_the_orm_does(echo_api):
    from runs.engine import caches
    from runs.engine.celery.run import claim_read
    from runs.models import StepResult

    _, bus = started(fan_out_flow("claim_read", 2), tag="beta")
    pk = bus.published[0].step_result_id
    claimed = claim_read(pk, worker=WORKER)

    assert claimed is not None
    won, tools = claimed
    row = StepResult.objects.select_related("run").get(pk=pk)
    assert (row.status, row.claim_token, row.worker) == ("running", won.token, WORKER)
    assert row.lease_expires_at is not None
    assert row.started_at is not None
    assert (won.result.pk, won.result.step_id, won.result.attempts) == (pk, row.step_id, 0)
    assert won.result.attempt_limit == row.attempt_limit
    assert won.result.claim_token == won.token
    assert won.run_status == "running"
    for field in Run._meta.concrete_fields:
        assert getattr(won.result.run, field.attname) == getattr(row.run, field.attname)
    assert won.result.run.inputs == {"tag": "beta"}
    assert won.result.run.started_at.tzinfo is not None
    assert tools == caches.tools_state()
    assert claim_read(pk, worker="another@local") is None  # a duplicate message
    assert claim_read(pk + 10_000, worker=WORKER) is None  # no such step
