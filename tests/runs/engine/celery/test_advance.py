"""Advancing a Celery run under its row lock (``runs.engine.celery.advance``): what a
settled step makes ready is queued, published, or kept for the settling task.
"""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.engine.celery import step as celery_step
from tests.celery_support import fan_out_flow
from tests.runs.engine.celery.conftest import WORKER, chain_flow, results, spread_flow, started

pytestmark = pytest.mark.django_db(transaction=True)


def test_steps_with_a_timeout_each_get_their_own_task(echo_api):
    run, bus = started(chain_flow("chain_timed", 3, timeout=20))

    bus.drain(worker=WORKER)

    run.refresh_from_db()
    assert run.status == "succeeded"
    assert [m.time_limit for m in bus.published] == [20, 20, 20]


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
    # Never queued on the way (the commits per hop: test_step_queries).
    sqls = [q["sql"] for q in queries.captured_queries]
    assert not [sql for sql in sqls if re.search(r"""SET "?status"? = 'queued'""", sql)]
    for row in results(run).values():
        assert (row.status, row.attempts, row.attempt_limit) == ("succeeded", 1, 3)
        assert row.worker == WORKER
        assert row.started_at is not None
        assert row.claim_token


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
    assert results(run)["c2"].status in {"pending", "skipped"}
    assert [r.path for r in echo_api.requests("echo")] == ["/echo/alpha/bad", "/echo/alpha/c1"]


# --- concurrency (PostgreSQL row locks) -----------------------------------------------


def test_two_parents_finishing_at_once_queue_the_join_exactly_once(echo_api):
    if connection.vendor != "postgresql":
        pytest.skip("row locks (select_for_update) need PostgreSQL; SQLite serialises writers")
    for attempt in range(5):
        run, bus = started(fan_out_flow(f"pair{attempt}", 2, delay=0.05))
        messages = list(bus.messages)
        bus.messages.clear()
        barrier = threading.Barrier(2)
        verdicts: list = []

        def work(message, barrier=barrier, bus=bus, verdicts=verdicts) -> None:
            try:
                barrier.wait()
                verdicts.append(
                    celery_step.step_execute(
                        step_result_id=message.step_result_id, worker=WORKER, publish=bus
                    )
                )
            finally:
                connection.close()

        threads = [threading.Thread(target=work, args=(m,)) for m in messages]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=30)

        # The join ran once, in the task of whichever parent settled last.
        assert bus.messages == []
        assert sorted(len(v.continued) for v in verdicts) == [0, 1]
        assert results(run)["join"].attempts == 1
        run.refresh_from_db()
        assert run.status == "succeeded"
