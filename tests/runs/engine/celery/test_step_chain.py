"""A chain continued in its step task, the claim's single round trip, the lazy heartbeat.

In process, with a ``Bus`` standing in for the broker (as in ``test_distributed``), on
both databases.
"""

from __future__ import annotations

import re
import sys
import threading
import time

import pytest
from django.db import DatabaseError, OperationalError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from runs.engine.celery import claim as celery_claim
from runs.engine.celery import heartbeat
from runs.engine.celery import step as celery_step
from runs.engine.celery.run import run_start
from runs.models import Run, StepResult
from runs.services import run_cancel, run_create
from runs.state import step_transition_returning
from tests.celery_support import Bus, fan_out_flow, import_flow

pytestmark = pytest.mark.django_db(transaction=True)

WORKER = "w-chain@local"


def chain_flow(name: str, n: int, **step: object) -> dict:
    ids = [f"c{i}" for i in range(1, n + 1)]
    steps = [
        {
            "id": sid,
            "kind": "tool",
            "tool": "echo",
            "input_mapping": {
                "tag": "$input.tag" if i == 0 else f"{ids[i - 1]}.tag",
                "name": sid,
                "delay": 0,
            },
            **step,
        }
        for i, sid in enumerate(ids)
    ]
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}},
        "steps": steps,
        "outputs": {"last": f"{ids[-1]}.name", "tag": f"{ids[-1]}.tag"},
    }


def started(data: dict, tag: str = "alpha") -> tuple[Run, Bus]:
    bus = Bus()
    run = run_create(workflow=import_flow(data), trigger="api", inputs={"tag": tag})
    run_start(run=run, publish=bus)
    return run, bus


def rows(run: Run) -> dict[str, StepResult]:
    return {r.step_id: r for r in run.step_results.order_by("step_id")}


def test_a_chain_runs_in_the_task_of_its_first_step_with_one_message(echo_api):
    run, bus = started(chain_flow("chain4", 4), tag="beta")

    verdicts = bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"last": "c4", "tag": "beta"}
    assert len(bus.published) == 1  # only the first step went through the broker
    assert [v.status for v in verdicts] == ["succeeded"] * 4
    for row in rows(run).values():
        assert row.status == "succeeded"
        assert row.worker == WORKER
        assert row.attempts == 1
        assert row.inputs["tag"] == "beta"  # the parent's output, read from memory
    assert [r.path for r in echo_api.requests("echo")] == [f"/echo/beta/c{i}" for i in range(1, 5)]


def test_steps_with_a_timeout_each_get_their_own_task(echo_api):
    run, bus = started(chain_flow("chain_timed", 3, timeout=20))

    bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded"
    assert [m.time_limit for m in bus.published] == [20, 20, 20]


def spread_flow(name: str) -> dict:
    """``root``, then ``leaf1``…``leaf3`` reading it."""
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {
                "id": "root",
                "kind": "tool",
                "tool": "echo",
                "input_mapping": {"tag": "$input.tag", "name": "root", "delay": 0},
            },
            *(
                {
                    "id": f"leaf{i}",
                    "kind": "tool",
                    "tool": "echo",
                    "input_mapping": {"tag": "root.tag", "name": f"leaf{i}", "delay": 0},
                }
                for i in range(1, 4)
            ),
        ],
    }


def test_a_fan_out_is_published_but_for_one_step_kept_by_the_task(echo_api):
    run, bus = started(spread_flow("spread"))
    names = dict(run.step_results.values_list("pk", "step_id"))

    first = bus.messages.pop(0)
    verdict = celery_step.step_execute(
        step_result_id=first.step_result_id, worker=WORKER, publish=bus
    )

    # leaf1 ran in root's task; leaf2 and leaf3 went to the broker for other workers.
    assert [names[m.step_result_id] for m in bus.messages] == ["leaf2", "leaf3"]
    assert [v.status for v in verdict.continued] == ["succeeded"]
    bus.drain(worker=WORKER)
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_a_continued_step_goes_from_pending_to_running_in_its_parents_settle(echo_api):
    run, bus = started(chain_flow("chain_claimed", 3))
    first = bus.messages.pop(0)

    with CaptureQueriesContext(connection) as queries:
        verdict = celery_step.step_execute(
            step_result_id=first.step_result_id, worker=WORKER, publish=bus
        )

    assert [v.status for v in (verdict, *verdict.continued)] == ["succeeded"] * 3
    # Never queued on the way (the commits per hop: test_step_task_queries).
    sqls = [q["sql"] for q in queries.captured_queries]
    assert not [sql for sql in sqls if re.search(r"""SET "?status"? = 'queued'""", sql)]
    for row in rows(run).values():
        assert (row.status, row.attempts, row.attempt_limit) == ("succeeded", 1, 3)
        assert row.worker == WORKER
        assert row.started_at is not None
        assert row.claim_token


def test_a_cancel_while_a_continued_step_runs_lets_it_finish_and_stops_the_chain(
    echo_api, monkeypatch
):
    run, bus = started(chain_flow("chain_cancel", 3))
    real = celery_step.execute_attempt

    def cancel_during_c2(ctx, step, args):
        if step.id == "c2":  # claimed by c1's settle: in flight when the cancel lands
            assert run_cancel(run=Run.objects.get(pk=run.pk)) is True
        return real(ctx, step, args)

    monkeypatch.setattr(celery_step, "execute_attempt", cancel_during_c2)

    verdicts = bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "cancelled"
    assert [v.status for v in verdicts] == ["succeeded", "succeeded"]  # c2's outcome counts
    assert {sid: r.status for sid, r in rows(run).items()} == {
        "c1": "succeeded",
        "c2": "succeeded",
        "c3": "skipped",
    }
    assert [r.path for r in echo_api.requests("echo")] == ["/echo/alpha/c1", "/echo/alpha/c2"]


def test_a_run_cancelled_before_a_held_step_is_claimed_never_starts_it(echo_api, monkeypatch):
    # root makes three leaves ready: two go to the broker, one is held (queued) for
    # root's task, which claims it only after the others were sent.
    run, bus = started(spread_flow("spread_cancel"))
    real_claim = celery_step.claim
    claims = []

    def cancel_before_the_second_claim(step_result_id, **kwargs):
        claims.append(step_result_id)
        if len(claims) == 2:
            run_cancel(run=Run.objects.get(pk=run.pk))
        return real_claim(step_result_id, **kwargs)

    monkeypatch.setattr(celery_step, "claim", cancel_before_the_second_claim)

    first = bus.messages.pop(0)
    verdict = celery_step.step_execute(
        step_result_id=first.step_result_id, worker=WORKER, publish=bus
    )

    run.refresh_from_db()
    assert run.status == "cancelled"
    assert [v.claimed for v in verdict.continued] == [False]  # leaf1 lost its claim: skipped
    assert {sid: r.status for sid, r in rows(run).items()} == {
        "leaf1": "skipped",
        "leaf2": "skipped",
        "leaf3": "skipped",
        "root": "succeeded",
    }
    assert [r.path for r in echo_api.requests("echo")] == ["/echo/alpha/root"]


def test_the_run_row_stays_locked_from_a_steps_outcome_to_its_childs_claim(echo_api, monkeypatch):
    if connection.vendor != "postgresql":
        pytest.skip("row locks (FOR UPDATE) need PostgreSQL; SQLite serialises writers")
    run, bus = started(chain_flow("chain_locked", 2))
    real = celery_step.claim_ready
    seen = []

    def try_to_lock_the_run_elsewhere() -> None:
        try:
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute("SELECT 1 FROM runs_run WHERE id = %s FOR UPDATE NOWAIT", [run.pk])
            seen.append("free")
        except OperationalError as exc:
            seen.append(type(exc.__cause__).__name__)
        finally:
            connection.close()

    def claim_while_checking(*args, **kwargs):
        other = threading.Thread(target=try_to_lock_the_run_elsewhere)
        other.start()
        other.join()
        return real(*args, **kwargs)

    monkeypatch.setattr(celery_step, "claim_ready", claim_while_checking)

    bus.drain(worker=WORKER)

    assert seen == ["LockNotAvailable"]  # a cancel would have waited for this commit
    run.refresh_from_db()
    assert run.status == "succeeded"


@pytest.mark.parametrize("timeout", [None, 20])
def test_a_lone_child_does_not_start_once_another_step_of_the_run_failed(echo_api, timeout):
    # c1 -> c2 beside `bad`, which fails first: nothing new starts after a failure.
    flow = chain_flow(f"chain_beside_failure_{timeout or 0}", 2)
    if timeout:
        flow["steps"][1]["timeout"] = timeout
    flow["steps"].append(
        {
            "id": "bad",
            "kind": "tool",
            "tool": "echo",
            "input_mapping": {"tag": "$input.tag", "name": "bad", "delay": 0},
        }
    )
    run, bus = started(flow)
    names = dict(run.step_results.values_list("pk", "step_id"))
    messages = {names[m.step_result_id]: m for m in bus.messages}
    bus.messages.clear()

    echo_api.fail("echo", status=404, times=1)
    bad = celery_step.step_execute(
        step_result_id=messages["bad"].step_result_id, worker=WORKER, publish=bus
    )
    c1 = celery_step.step_execute(
        step_result_id=messages["c1"].step_result_id, worker=WORKER, publish=bus
    )

    assert (bad.status, c1.status, c1.follow, c1.continued) == ("failed", "succeeded", None, ())
    assert bus.messages == []
    run.refresh_from_db()
    assert run.status == "failed"
    assert rows(run)["c2"].status in {"pending", "skipped"}
    assert [r.path for r in echo_api.requests("echo")] == ["/echo/alpha/bad", "/echo/alpha/c1"]


def test_a_retry_in_a_continued_step_goes_through_the_broker(echo_api, monkeypatch):
    run, bus = started(chain_flow("chain_retry2", 2))
    names = dict(run.step_results.values_list("pk", "step_id"))
    calls = {"n": 0}
    real = celery_step.execute_attempt

    def fail_c2_once(ctx, step, args):
        if step.id == "c2" and not calls["n"]:
            calls["n"] += 1
            echo_api.fail("echo", status=503, times=1)
        return real(ctx, step, args)

    monkeypatch.setattr(celery_step, "execute_attempt", fail_c2_once)

    first = bus.messages.pop(0)
    verdict = celery_step.step_execute(
        step_result_id=first.step_result_id, worker=WORKER, publish=bus
    )

    assert verdict.retry_in is None  # the task's own step succeeded
    assert [(v.status, v.retry_in) for v in verdict.continued] == [("queued", 0.05)]
    assert [(names[m.step_result_id], m.countdown) for m in bus.messages] == [("c2", 0.05)]
    bus.drain(worker=WORKER)
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert [e["status"] for e in rows(run)["c2"].attempt_log] == ["failed", "succeeded"]


# --- the claim ------------------------------------------------------------------------


def test_the_claim_reads_back_the_attempt_counters_and_the_run_status(echo_api):
    run, bus = started(fan_out_flow("claimed", 1))
    pk = bus.messages[0].step_result_id

    won = celery_claim.claim(pk, worker=WORKER, inputs={"a": 1})
    lost = celery_claim.claim(pk, worker="late@local")

    assert lost is None
    assert won is not None
    assert (won.result.step_id, won.result.run_id, won.run_status) == ("s01", run.pk, "running")
    assert (won.result.attempts, won.result.attempt_limit, won.result.attempt_log) == (0, 3, [])
    row = StepResult.objects.get(pk=pk)
    assert (row.status, row.claim_token, row.worker, row.inputs) == (
        "running",
        won.token,
        WORKER,
        {"a": 1},
    )
    assert row.started_at is not None


def test_without_returning_the_claim_updates_then_selects_in_one_transaction(echo_api, monkeypatch):
    _, bus = started(fan_out_flow("claimed_old", 1))
    pk = bus.messages[0].step_result_id
    monkeypatch.setattr(connection.features, "can_return_columns_from_insert", False)

    won = celery_claim.claim(pk, worker=WORKER)
    lost = celery_claim.claim(pk, worker="late@local")

    assert lost is None
    assert won is not None
    assert (won.result.step_id, won.run_status, won.result.attempt_limit) == ("s01", "running", 3)
    assert StepResult.objects.get(pk=pk).claim_token == won.token


def test_a_claim_cannot_be_asked_for_a_move_the_state_table_forbids():
    with pytest.raises(ValueError, match="cannot move from 'succeeded' to 'running'"):
        step_transition_returning(StepResult, 1, "running", status="succeeded", fields={})


# --- the heartbeat --------------------------------------------------------------------


def claimed_step(echo_api) -> tuple[int, str]:
    _, bus = started(fan_out_flow("beating", 1))
    pk = bus.messages[0].step_result_id
    token = celery_claim.claim_step(pk, worker=WORKER)
    assert token
    return pk, token


def test_an_attempt_shorter_than_a_second_never_renews_its_lease(echo_api):
    pk, token = claimed_step(echo_api)
    before = StepResult.objects.get(pk=pk).lease_expires_at
    renewals = heartbeat.HEARTBEATS.renewals

    with heartbeat.heartbeat(pk, token, lease=30):
        time.sleep(0.2)

    assert heartbeat.HEARTBEATS.renewals == renewals
    assert StepResult.objects.get(pk=pk).lease_expires_at == before


def test_a_long_attempt_has_its_lease_renewed_every_third_of_it(echo_api):
    pk, token = claimed_step(echo_api)
    StepResult.objects.filter(pk=pk).update(lease_expires_at=timezone.now())
    renewals = heartbeat.HEARTBEATS.renewals

    with heartbeat.heartbeat(pk, token, lease=0.6):  # beats at 0.2 s, then every 0.2 s
        time.sleep(0.9)

    assert heartbeat.HEARTBEATS.renewals - renewals >= 3
    assert StepResult.objects.get(pk=pk).lease_expires_at > timezone.now()


def test_the_heartbeat_leaves_a_step_the_sweeper_took_back_alone(echo_api):
    pk, token = claimed_step(echo_api)
    StepResult.objects.filter(pk=pk).update(claim_token="someone-else")
    before = StepResult.objects.get(pk=pk).lease_expires_at

    with heartbeat.heartbeat(pk, token, lease=0.3):
        time.sleep(0.4)

    assert StepResult.objects.get(pk=pk).lease_expires_at == before


def test_a_failed_renewal_is_logged_and_the_next_beat_tries_again(echo_api, monkeypatch, caplog):
    pk, token = claimed_step(echo_api)
    real_filter = StepResult.objects.filter
    failures = []

    def flaky_filter(*args, **kwargs):
        if not failures:
            failures.append(1)
            raise DatabaseError("connection lost")
        return real_filter(*args, **kwargs)

    monkeypatch.setattr(StepResult.objects, "filter", flaky_filter)
    renewals = heartbeat.HEARTBEATS.renewals

    with (
        caplog.at_level("WARNING", logger="flowpilot.engine"),
        heartbeat.heartbeat(pk, token, lease=0.3),
    ):
        time.sleep(0.5)

    assert failures == [1]
    assert heartbeat.HEARTBEATS.renewals > renewals  # the beats after the failure landed
    assert f"heartbeat of step result {pk} failed" in caplog.text


# --- connections around a task (config/celery_app.py) ---------------------------------


class _Request:
    def __init__(self, eager: bool) -> None:
        self.is_eager = eager


class _Task:
    def __init__(self, eager: bool) -> None:
        self.request = _Request(eager)


def test_a_worker_task_recycles_old_connections_and_an_eager_one_leaves_them(monkeypatch):
    celery_app = sys.modules["config.celery_app"]  # `config.celery_app` is also the app
    calls = []
    monkeypatch.setattr(celery_app, "close_old_connections", lambda: calls.append("closed"))

    celery_app._recycle_old_connections(sender=_Task(eager=True))
    assert calls == []  # eager: the caller's own connection and transaction
    celery_app._recycle_old_connections(sender=_Task(eager=False))
    assert calls == ["closed"]


def test_a_database_error_in_a_held_step_sends_it_to_the_broker(echo_api, monkeypatch):
    run, bus = started(spread_flow("spread_db_error"))
    names = dict(run.step_results.values_list("pk", "step_id"))
    real_claim = celery_step.claim
    claims = []

    def fail_second_claim(step_result_id, **kwargs):
        claims.append(step_result_id)
        if len(claims) == 2:
            raise OperationalError("the database went away")
        return real_claim(step_result_id, **kwargs)

    monkeypatch.setattr(celery_step, "claim", fail_second_claim)
    first = bus.messages.pop(0)

    with pytest.raises(OperationalError):  # the task retries itself for its own step
        celery_step.step_execute(step_result_id=first.step_result_id, worker=WORKER, publish=bus)

    assert [names[m.step_result_id] for m in bus.messages] == ["leaf2", "leaf3", "leaf1"]
    bus.drain(worker=WORKER)
    run.refresh_from_db()
    assert run.status == "succeeded"


def test_a_database_error_claiming_a_child_retries_the_whole_settle(echo_api, monkeypatch):
    run, bus = started(chain_flow("chain_db_error", 3))
    real = celery_step.claim_ready
    calls = []

    def fail_the_first_claim_of_c2(run_id, step_id, **kwargs):
        calls.append(step_id)
        if calls == ["c2"]:
            raise OperationalError("the database went away")
        return real(run_id, step_id, **kwargs)

    monkeypatch.setattr(celery_step, "claim_ready", fail_the_first_claim_of_c2)

    verdicts = bus.drain(worker=WORKER)

    # c1's outcome and c2's claim were rolled back together and written again once.
    assert calls == ["c2", "c2", "c3"]
    assert [v.status for v in verdicts] == ["succeeded"] * 3
    assert len(bus.published) == 1
    for row in rows(run).values():
        assert (row.status, row.attempts, len(row.attempt_log)) == ("succeeded", 1, 1)
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert [r.path for r in echo_api.requests("echo")] == [f"/echo/alpha/c{i}" for i in (1, 2, 3)]
