"""Schedules on real processes: two ``celery beat`` (database scheduler), two workers, Redis
and PostgreSQL, with interval schedules of one second.

One scenario, several schedules at once (each process start costs seconds):

- ``quick``: runs fire and succeed; after both beats stop for a while and one comes
  back, the fires missed beyond the catch-up window are logged and one catch-up runs;
- ``slow_skip`` / ``slow_buffer``: runs take longer than the interval, so ``skip``
  skips and ``buffer_one`` starts one buffered fire after the run ends;
- ``broken``: every run fails; after two in a row the schedule pauses;
- ``leader``: ``allow_all`` under two beats: each fire time has exactly one run.
"""

from __future__ import annotations

import time
from collections import Counter
from itertools import pairwise

import pytest

from runs.models import Run, RunStatus
from schedules.models import FireOutcome, Schedule, ScheduleFire
from schedules.services import Policy, schedule_create
from tests.celery_support import import_flow, wait_until
from tests.startup import start_deadline
from workflows.services import workflow_activate_trusted

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
]


def flow(name: str, *, tool: str = "echo", delay: float = 0.0) -> None:
    mapping = {"tag": name, "name": "x", "delay": delay} if tool == "echo" else {"tag": name}
    workflow = import_flow(
        {"name": name, "steps": [{"id": "call", "kind": "tool", "tool": tool,
                                  "input_mapping": mapping}]}
    )  # fmt: skip
    workflow_activate_trusted(workflow=workflow)


def every_second(name: str, **policy) -> Schedule:
    return schedule_create(workflow_name=name, name="tick", interval=1, policy=Policy(**policy))


def fires(schedule: Schedule, outcome: str | None = None):
    rows = ScheduleFire.objects.filter(schedule=schedule)
    return rows.filter(outcome=outcome) if outcome else rows


def runs_of(name: str):
    return Run.objects.filter(workflow__name=name).order_by("started_at", "id")


def test_schedules_fire_on_real_beat_and_workers(workers, echo_tools):
    echo_tools.fail("sink", status=400, body={"error": "rejected"})
    for name, kwargs in {"quick": {}, "slow_skip": {"delay": 2.5}, "slow_buffer": {"delay": 2.5},
                         "broken": {"tool": "sink"}, "leader": {}}.items():  # fmt: skip
        flow(name, **kwargs)
    quick = every_second("quick", catchup_window=2)
    skip = every_second("slow_skip")
    buffer = every_second("slow_buffer", overlap="buffer_one")
    broken = every_second("broken", pause_after_failures=2)
    leader = every_second("leader", overlap="allow_all")

    workers.start_beat("beat1")
    workers.start_beat("beat2")
    try:
        wait_until(
            lambda: fires(buffer, FireOutcome.BUFFERED).filter(run__status="succeeded").exists()
            and Schedule.objects.get(pk=broken.pk).paused
            and fires(leader, FireOutcome.STARTED).count() >= 6,
            timeout=90,
            what="buffered run, pause and six leader fires",
        )
    except AssertionError:
        raise AssertionError(workers.logs()) from None
    workers.stop("beat1")
    workers.stop("beat2")

    # a scheduled run fires and succeeds, on the workers
    assert runs_of("quick").filter(status=RunStatus.SUCCEEDED, trigger="schedule").exists()

    # two beats: both sent the fires, yet each fire time started exactly one run
    leader.refresh_from_db()
    for beat in ("beat1", "beat2"):
        log = (workers.log_dir / f"{beat}.log").read_text()
        assert f"Sending due task flowpilot-schedule-{leader.pk}" in log
    assert leader.duplicates_suppressed > 0
    per_time = Counter(
        fires(leader).filter(run__isnull=False).values_list("fire_time", flat=True)
    )
    assert per_time
    assert set(per_time.values()) == {1}
    assert runs_of("leader").count() == fires(leader, FireOutcome.STARTED).count()

    # skip: never two runs at once, and fires were skipped meanwhile
    assert fires(skip, FireOutcome.SKIPPED_OVERLAP).exists()
    spans = [(r.started_at, r.finished_at) for r in runs_of("slow_skip").exclude(started_at=None)]
    assert all(a[1] is None or a[1] <= b[0] for a, b in pairwise(spans))

    # buffer_one: the buffered fire started after the run before it had finished
    buffered = fires(buffer, FireOutcome.BUFFERED).filter(run__status="succeeded").first()
    before = runs_of("slow_buffer").filter(started_at__lt=buffered.run.started_at).last()
    assert before.finished_at <= buffered.run.started_at

    # pause after two failures in a row, and nothing started after the pause
    broken.refresh_from_db()
    assert broken.consecutive_failures == 2
    assert list(runs_of("broken").values_list("status", flat=True)) == ["failed", "failed"]
    assert "2 scheduled runs failed in a row" in fires(broken, FireOutcome.PAUSED).get().detail

    # catch-up: the scheduler is down 5 s; one beat comes back
    quick.refresh_from_db()
    down_since = quick.last_fire_time
    time.sleep(5)
    workers.start_beat("beat1")
    try:
        first_back = wait_until(
            lambda: fires(quick, FireOutcome.STARTED).filter(fire_time__gt=down_since).first(),
            timeout=start_deadline(),
            what="the first fire after the restart",
        )
    finally:
        workers.stop("beat1")
    missed = fires(quick, FireOutcome.MISSED).filter(fire_time__gt=down_since)
    assert missed.count() >= 2
    assert all(m.fire_time < first_back.fire_time for m in missed)
    assert not fires(quick).filter(
        fire_time__gt=down_since, fire_time__lt=first_back.fire_time
    ).exclude(outcome=FireOutcome.MISSED).exists()
