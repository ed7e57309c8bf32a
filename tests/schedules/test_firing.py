"""What a fire does, on an injected clock: fire times, the leader, overlap, catch-up, pausing."""

from datetime import UTC, datetime, timedelta

import pytest

from runs.models import Run, RunStatus, RunTrigger
from runs.state import run_transition
from schedules.firing import schedule_fire, schedule_run_finished
from schedules.models import FireOutcome, Schedule
from schedules.services import Policy, schedule_create
from workflows.models import WorkflowStatus
from workflows.services import workflow_transition

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 6, 1, 7, 0, tzinfo=UTC)
DEFAULT = Policy()


def fire_at(schedule, now, starts, rng):
    return schedule_fire(schedule_id=schedule.pk, now=now, start=starts, rng=rng)


def end_run(run, status):
    run_transition(run, RunStatus.RUNNING)
    run_transition(run, status, finished_at=T0)


def cron(policy=DEFAULT):
    return schedule_create(
        workflow_name="nightly", name="s", cron="0 9 * * *", tz="Europe/Paris", policy=policy
    )


def every(seconds, policy=DEFAULT):
    schedule = schedule_create(workflow_name="nightly", name="s", interval=seconds, policy=policy)
    Schedule.objects.filter(pk=schedule.pk).update(created_at=T0)
    schedule.refresh_from_db()
    return schedule


def test_a_cron_fire_maps_to_its_wall_clock_time_and_starts_one_run(
    active_flow, starts, rng, django_capture_on_commit_callbacks
):
    schedule = cron()  # 09:00 in Paris is 07:00 UTC in June
    with django_capture_on_commit_callbacks(execute=True):
        fire = fire_at(schedule, T0 + timedelta(seconds=3), starts, rng)
        second_beat = fire_at(schedule, T0 + timedelta(seconds=4), starts, rng)

    assert (fire.fire_time, fire.outcome, fire.workflow_version) == (T0, "started", 1)
    assert second_beat is None
    run = Run.objects.get()
    assert (run.trigger, run.inputs) == (RunTrigger.SCHEDULE, {"n": 1})
    assert starts.calls == [(run.pk, 0.0)]
    schedule.refresh_from_db()
    assert (schedule.last_fire_time, schedule.duplicates_suppressed) == (T0, 1)


def test_the_unique_fire_time_backs_up_the_lock(active_flow, starts, rng):
    from django.db import IntegrityError, transaction

    schedule = cron()
    fire_at(schedule, T0, starts, rng)
    with pytest.raises(IntegrityError), transaction.atomic():
        schedule.fires.create(fire_time=T0, outcome=FireOutcome.SKIPPED_OVERLAP)
    schedule.fires.create(fire_time=T0, outcome=FireOutcome.PAUSED)  # events may share it


def test_overlap_skip_skips_while_a_run_is_in_flight(active_flow, starts, rng):
    schedule = every(10)
    first = fire_at(schedule, T0, starts, rng)
    second = fire_at(schedule, T0 + timedelta(seconds=10), starts, rng)

    assert (first.outcome, second.outcome) == ("started", "skipped_overlap")
    assert second.detail == f"run {first.run_id} in flight"
    end_run(first.run, RunStatus.SUCCEEDED)
    assert fire_at(schedule, T0 + timedelta(seconds=20), starts, rng).outcome == "started"


def test_buffer_one_keeps_one_fire_and_starts_it_when_the_run_ends(
    active_flow, starts, rng, django_capture_on_commit_callbacks
):
    schedule = every(10, Policy(overlap="buffer_one"))
    first = fire_at(schedule, T0, starts, rng)
    buffered = fire_at(schedule, T0 + timedelta(seconds=10), starts, rng)
    third = fire_at(schedule, T0 + timedelta(seconds=20), starts, rng)
    assert [first.outcome, buffered.outcome, third.outcome] == [
        "started", "buffered", "skipped_overlap",
    ]  # fmt: skip
    assert buffered.run is None

    end_run(first.run, RunStatus.SUCCEEDED)
    with django_capture_on_commit_callbacks(execute=True):
        schedule_run_finished(run_id=first.run_id, start=starts, rng=rng)

    buffered.refresh_from_db()
    assert buffered.run.status == RunStatus.PENDING
    assert "started when the run before it finished" in buffered.detail
    assert starts.calls == [(buffered.run_id, 0.0)]


def test_allow_all_starts_every_fire(active_flow, starts, rng):
    schedule = every(10, Policy(overlap="allow_all"))
    fires = [fire_at(schedule, T0 + timedelta(seconds=s), starts, rng) for s in (0, 10, 20)]
    assert [f.outcome for f in fires] == ["started"] * 3
    assert Run.objects.filter(status=RunStatus.PENDING).count() == 3


def test_catch_up_runs_once_for_recent_misses_and_logs_older_ones(active_flow, starts, rng):
    schedule = cron(Policy(catchup_window=36 * 3600))
    fire_at(schedule, T0, starts, rng)  # day 0
    end_run(Run.objects.get(), RunStatus.SUCCEEDED)

    # beat was down for days 1..3; it comes back on day 3 at 07:00:10 UTC
    back = T0 + timedelta(days=3, seconds=10)
    fire = fire_at(schedule, back, starts, rng)

    assert (fire.fire_time, fire.outcome) == (T0 + timedelta(days=3), "started")
    missed = schedule.fires.filter(outcome=FireOutcome.MISSED).order_by("fire_time")
    assert [f.fire_time for f in missed] == [T0 + timedelta(days=1)]  # day 2 is within 36 h
    assert Run.objects.count() == 2  # days 2 and 3 ran once, together


def test_a_fire_older_than_the_window_is_missed_not_run(active_flow, starts, rng):
    schedule = cron(Policy(catchup_window=600))
    fire = fire_at(schedule, T0 + timedelta(hours=2), starts, rng)
    assert (fire.outcome, fire.run) == ("missed", None)
    assert fire.detail == "handled 7200 s late"


def test_without_an_active_version_a_fire_is_skipped(active_flow, starts, rng):
    schedule = every(10)
    workflow_transition(workflow=active_flow, to=WorkflowStatus.ARCHIVED)
    fire = fire_at(schedule, T0, starts, rng)
    assert (fire.outcome, fire.detail) == ("skipped_inactive", "no active version of nightly")


def test_a_refused_run_is_recorded_not_started(active_flow, starts, rng):
    schedule = every(10)
    Schedule.objects.filter(pk=schedule.pk).update(inputs={"n": "ten"})
    fire = fire_at(schedule, T0, starts, rng)
    assert fire.outcome == "not_started"
    assert "`n`" in fire.detail


def test_jitter_delays_the_start_within_the_bound(active_flow, starts, rng):
    schedule = every(10, Policy(jitter=30, overlap="allow_all"))
    delays = [fire_at(schedule, T0 + timedelta(seconds=10 * i), starts, rng).delay_seconds
              for i in range(5)]  # fmt: skip
    assert all(0 <= d <= 30 for d in delays)
    assert len(set(delays)) == 5


def test_n_failed_runs_in_a_row_pause_the_schedule(active_flow, starts, rng):
    schedule = every(10, Policy(pause_after_failures=2))
    outcomes = []
    for i, status in enumerate([RunStatus.FAILED, RunStatus.SUCCEEDED, RunStatus.FAILED,
                                RunStatus.FAILED]):  # fmt: skip
        fire = fire_at(schedule, T0 + timedelta(seconds=10 * i), starts, rng)
        end_run(fire.run, status)
        schedule_run_finished(run_id=fire.run_id, start=starts, rng=rng)
        schedule.refresh_from_db()
        outcomes.append((schedule.consecutive_failures, schedule.paused))

    assert outcomes == [(1, False), (0, False), (1, False), (2, True)]
    pause = schedule.fires.get(outcome=FireOutcome.PAUSED)
    assert "2 scheduled runs failed in a row (pause_after_failures: 2)" in pause.detail
    assert not schedule.periodic_task.enabled
    assert fire_at(schedule, T0 + timedelta(seconds=60), starts, rng) is None


def test_a_run_that_was_not_scheduled_is_ignored(active_flow, starts, rng):
    from runs.services import run_create

    run = run_create(workflow=active_flow, trigger=RunTrigger.CLI)
    schedule_run_finished(run_id=run.pk, start=starts, rng=rng)
    assert starts.calls == []
