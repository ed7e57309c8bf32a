"""Start-up deadlines derived from a measured Django start (tests/startup.py)."""

import pytest

from tests import startup


@pytest.mark.parametrize(
    ("measured", "starts", "deadline"),
    [
        (0.3, 1, startup.FLOOR),  # a fast machine: never less than the floor
        (2.0, 1, 2.0 * startup.MARGIN),  # a busy one: a multiple of what a start took
        (2.0, 2, 4.0 * startup.MARGIN),  # a Celery worker and its pool: two starts
        (0.3, 2, 2 * startup.FLOOR),
    ],
)
def test_the_deadline_is_a_multiple_of_the_measured_start_never_below_the_floor(
    measured, starts, deadline
):
    assert startup.deadline_for(measured, starts) == deadline


def test_the_start_is_measured_once_per_process():
    first = startup.start_seconds()

    assert first > 0
    assert startup.start_seconds() is first  # cached: one probe per test process
    assert startup.start_deadline() == startup.deadline_for(first)
