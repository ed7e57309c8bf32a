"""schedules.selectors: schedules listed by workflow then name, one found by its two
names, a fire log newest fire time first, the last retention sweep."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from schedules.models import FireOutcome, RetentionSweep, ScheduleFire
from schedules.selectors import (
    retention_last,
    schedule_fire_log,
    schedule_fires,
    schedule_get,
    schedule_list,
)
from schedules.services import schedule_create
from tests.schedules.conftest import QUICK_FLOW
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db

NOON = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def test_schedules_are_listed_by_workflow_then_name_and_filtered_by_workflow(active_flow):
    workflow_import(data={**QUICK_FLOW, "name": "alpha"})
    for workflow, name in [("nightly", "b"), ("alpha", "z"), ("nightly", "a")]:
        schedule_create(workflow_name=workflow, name=name, cron="0 9 * * *")
    assert [(s.workflow_name, s.name) for s in schedule_list()] == [
        ("alpha", "z"), ("nightly", "a"), ("nightly", "b"),
    ]  # fmt: skip
    assert [s.name for s in schedule_list(workflow_name="nightly")] == ["a", "b"]
    assert schedule_get(workflow_name="nightly", name="a").name == "a"
    assert schedule_get(workflow_name="alpha", name="a") is None


def test_the_fire_log_is_newest_fire_time_first_whatever_the_order_written_and_bounded(
    active_flow,
):
    schedule = schedule_create(workflow_name="nightly", name="s", interval=60)
    fires = {
        minutes: ScheduleFire.objects.create(
            schedule=schedule,
            fire_time=NOON + timedelta(minutes=minutes),
            outcome=FireOutcome.STARTED,
        )
        for minutes in (1, 3, 2)
    }
    assert list(schedule_fire_log(schedule=schedule)) == [fires[3], fires[2], fires[1]]
    assert schedule_fires(schedule=schedule, limit=2) == [fires[3], fires[2]]


def test_the_last_retention_sweep_is_the_newest_started():
    assert retention_last() is None
    RetentionSweep.objects.create(started_at=NOON)
    newest = RetentionSweep.objects.create(started_at=NOON + timedelta(days=1))
    RetentionSweep.objects.create(started_at=NOON - timedelta(days=1))
    assert retention_last() == newest
