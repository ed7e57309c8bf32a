"""`loop` steps on real Celery workers: each iteration parks the step on its child run,
and a succeeded child queues the step again for the next iteration.

Two ``celery worker`` subprocesses on Redis and the shared PostgreSQL test database;
the iterations call the loopback reviewer of this module (``tests.runs.loops``).
"""

from __future__ import annotations

import pytest

from runs.models import Run
from runs.restart import run_restart
from runs.services import run_create, run_enqueue
from tests.fakes import FakeAPI
from tests.runs.loops import checks, fixup_flow, install_check, load_check_tool, polish_flow
from tests.runs.subflows import activate
from tests.runs.test_celery_subworkflows import at_rest

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
    pytest.mark.usefixtures("workers"),
]


@pytest.fixture
def reviewer_api():
    fake = FakeAPI().start()
    install_check(fake)
    load_check_tool(fake)
    yield fake
    fake.stop()


def test_a_review_loop_on_the_workers_iterates_until_the_check_passes(workers, reviewer_api):
    activate(fixup_flow())
    polish = activate(polish_flow())

    run = run_enqueue(run=run_create(workflow=polish, trigger="api", inputs={"draft": "hi"}))
    run = at_rest(run, workers)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"final": "hi!!", "rounds": 3, "held": True}
    assert checks(reviewer_api) == ["hi", "hi!", "hi!!"]
    review = run.step_results.get(step_id="review")
    children = list(Run.objects.filter(parent_step=review).order_by("pk"))
    assert [c.status for c in children] == ["succeeded"] * 3
    assert review.output["count"] == 3
    assert review.attempts == 1  # iterations queue the step again without using up tries
    assert len(review.attempt_log) == 1

    reviewer_api.clear()
    again = at_rest(run_restart(run=run, from_step="review#2"), workers)

    assert again.status == "succeeded", again.error_summary
    assert checks(reviewer_api) == ["hi!", "hi!!"]
    assert again.outputs == run.outputs
