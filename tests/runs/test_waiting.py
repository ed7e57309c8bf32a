"""runs.waiting: the API's long poll — read the run until it is finished or the time is up,
sleeping at most the interval and never past the deadline (clock and sleep injected)."""

from __future__ import annotations

import pytest

from runs.models import Run, RunStatus
from runs.waiting import run_wait
from tests.factories import RunFactory

pytestmark = pytest.mark.django_db


class Clock:
    """A fake monotonic clock that sleeping advances; finishes the run at ``finish_at``."""

    def __init__(self, run: Run | None = None, finish_at: float | None = None) -> None:
        self.now, self.sleeps, self.run, self.finish_at = 0.0, [], run, finish_at

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        if self.run is not None and self.finish_at is not None and self.now >= self.finish_at:
            Run.objects.filter(pk=self.run.pk).update(status=RunStatus.SUCCEEDED)


def test_a_finished_run_answers_at_once():
    run = RunFactory()
    clock = Clock()
    assert run_wait(run_id=run.pk, timeout=5, clock=clock, sleep=clock.sleep) == (run, True)
    assert clock.sleeps == []


def test_a_run_that_finishes_while_waited_on_is_returned_finished():
    run = RunFactory(status=RunStatus.RUNNING)
    clock = Clock(run, finish_at=0.6)
    found, finished = run_wait(run_id=run.pk, timeout=5, clock=clock, sleep=clock.sleep)
    assert finished
    assert found.status == RunStatus.SUCCEEDED
    assert clock.sleeps == [0.25, 0.25, 0.25]


def test_the_wait_ends_at_the_deadline_with_the_run_as_last_read():
    run = RunFactory(status=RunStatus.RUNNING)
    clock = Clock()
    found, finished = run_wait(run_id=run.pk, timeout=0.6, clock=clock, sleep=clock.sleep)
    assert not finished
    assert found.status == RunStatus.RUNNING
    assert clock.sleeps == pytest.approx([0.25, 0.25, 0.1])  # never past the deadline
    assert run_wait(run_id=run.pk, timeout=-3, clock=clock, sleep=clock.sleep)[1] is False


def test_an_unknown_run_raises():
    with pytest.raises(Run.DoesNotExist):
        run_wait(run_id=10**9, timeout=1)
