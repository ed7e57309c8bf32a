"""A chain continued in its step task (``runs.engine.celery.step.continue_chain``).

In process, with a ``Bus`` standing in for the broker (``tests.celery_support``), on
both databases.
"""

from __future__ import annotations

import threading

import pytest
from django.db import OperationalError, connection, transaction

from runs.engine.celery import step as celery_step
from runs.models import Run
from runs.services import run_cancel
from tests.runs.engine.celery.conftest import WORKER, chain_flow, results, spread_flow, started

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_chain_runs_in_the_task_of_its_first_step_with_one_message(echo_api):
    run, bus = started(chain_flow("chain4", 4), tag="beta")

    verdicts = bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"last": "c4", "tag": "beta"}
    assert len(bus.published) == 1  # only the first step went through the broker
    assert [v.status for v in verdicts] == ["succeeded"] * 4
    for row in results(run).values():
        assert row.status == "succeeded"
        assert row.worker == WORKER
        assert row.attempts == 1
        assert row.inputs["tag"] == "beta"  # the parent's output, read from memory
    assert [r.path for r in echo_api.requests("echo")] == [f"/echo/beta/c{i}" for i in range(1, 5)]


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
    assert {sid: r.status for sid, r in results(run).items()} == {
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
        # root's own claim is its first read (``run.claim_read``): the first call here
        # is the second claim of the task, the held leaf's.
        claims.append(step_result_id)
        if len(claims) == 1:
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
    assert {sid: r.status for sid, r in results(run).items()} == {
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
    assert [e["status"] for e in results(run)["c2"].attempt_log] == ["failed", "succeeded"]


def test_a_database_error_in_a_held_step_sends_it_to_the_broker(echo_api, monkeypatch):
    run, bus = started(spread_flow("spread_db_error"))
    names = dict(run.step_results.values_list("pk", "step_id"))
    real_claim = celery_step.claim
    claims = []

    def fail_second_claim(step_result_id, **kwargs):
        claims.append(step_result_id)  # the held leaf's: root's was its first read
        if len(claims) == 1:
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
    for row in results(run).values():
        assert (row.status, row.attempts, len(row.attempt_log)) == ("succeeded", 1, 1)
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert [r.path for r in echo_api.requests("echo")] == [f"/echo/alpha/c{i}" for i in (1, 2, 3)]


def test_a_validation_chain_stores_each_recorded_call_before_the_run_finishes(
    echo_api, monkeypatch
):
    # The whole chain runs in one task, whose context closes only after the last
    # step's settle finished the run: the calls must be stored before that, or a replay
    # started as soon as the run is seen finished finds none.
    from runs.engine.celery import advance
    from runs.engine.celery.run import run_start
    from runs.models import ToolCallRecording
    from runs.services import run_create
    from tests.celery_support import Bus, import_flow

    bus = Bus()
    run = run_create(
        workflow=import_flow(chain_flow("chain_recorded", 3)),
        trigger="validation",
        inputs={"tag": "gamma"},
    )
    run_start(run=run, publish=bus)
    real_finish = advance.run_finish
    seen = []

    def finish(ctx, finishing, *args, **kwargs):
        recorded = ToolCallRecording.objects.filter(step_result__run_id=finishing.pk)
        seen.append(sorted(recorded.values_list("step_result__step_id", flat=True)))
        return real_finish(ctx, finishing, *args, **kwargs)

    monkeypatch.setattr(advance, "run_finish", finish)

    verdicts = bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert len(bus.published) == 1  # one task ran the chain
    assert [v.status for v in verdicts] == ["succeeded"] * 3
    assert seen == [["c1", "c2", "c3"]]  # all stored when the run finished
    assert ToolCallRecording.objects.filter(step_result__run=run).count() == 3  # once each


def test_a_database_error_before_the_try_gives_the_claim_back(echo_api, monkeypatch):
    # The claim is the task's first statement; a database error after it, before the
    # try (reading the upstream outputs), must not leave the step to the sweeper.
    run, bus = started(chain_flow("chain_give_back", 2, timeout=30))
    bus.drain(limit=1)  # c1: c2 is published, not continued (it has a time limit)
    real = celery_step._resolved

    def database_gone(*args, **kwargs):
        raise OperationalError("the database went away")

    monkeypatch.setattr(celery_step, "_resolved", database_gone)
    (message,) = bus.messages
    with pytest.raises(OperationalError):  # the task retries itself
        celery_step.step_execute(step_result_id=message.step_result_id, worker=WORKER, publish=bus)

    c2 = results(run)["c2"]
    assert (c2.status, c2.claim_token, c2.attempts) == ("queued", "", 0)
    monkeypatch.setattr(celery_step, "_resolved", real)
    bus.drain(worker=WORKER)  # the retried task claims it again
    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    assert [e["status"] for e in results(run)["c2"].attempt_log] == ["succeeded"]
