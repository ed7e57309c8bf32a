"""The admin's home page: what failed, what waits for me, what runs next, what is down.

``home_data`` gathers, for one user, the failed runs of the last 24 hours with their
error, the versions waiting for that user's approval, the next fire of each active
schedule, the open circuit breakers and the health of the broker, workers and beat.
The admin site (``config.admin.FlowpilotAdminSite.index``) renders it above the app
list. A fixed number of queries whatever the rows: each list is capped.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from health.checks import CheckResult, health_report
from review.models import Approval, ApprovalStatus
from runs.models import Run, RunStatus
from schedules.models import Schedule
from schedules.next_fire import NextFire, schedule_next_fire
from workflows.models import Workflow, WorkflowStatus

FAILED_WINDOW = timedelta(hours=24)
SHOWN = 10  # rows of each list; the "all" link opens the filtered list
HEALTH_COMPONENTS = ("broker", "workers", "beat", "breakers")


@dataclass(frozen=True)
class UpcomingFire:
    schedule: Schedule
    next_fire: NextFire


@dataclass(frozen=True)
class Home:
    failed_runs: list[Run]
    failed_total: int
    waiting: list[Workflow]
    waiting_total: int
    upcoming: list[UpcomingFire]
    health: tuple[CheckResult, ...]
    open_breakers: list[dict[str, Any]]
    since: datetime


def failed_runs(*, now: datetime) -> QuerySet[Run]:
    """Runs that failed in the last 24 hours, newest first (their workflow joined)."""
    return (
        Run.objects.filter(status=RunStatus.FAILED, created_at__gte=now - FAILED_WINDOW)
        .select_related("workflow")
        .order_by("-created_at", "-id")
    )


def waiting_for(*, user: AbstractBaseUser | AnonymousUser) -> QuerySet[Workflow]:
    """Versions in review that ``user`` has not approved yet (their definition), oldest
    first: a reviewer's to-do list."""
    mine = Approval.objects.filter(
        workflow=OuterRef("pk"),
        definition_hash=OuterRef("definition_hash"),
        approved_by_id=getattr(user, "pk", None),
        status__in=[ApprovalStatus.PENDING, ApprovalStatus.VALIDATING, ApprovalStatus.PASSED],
    )
    return (
        Workflow.objects.filter(status=WorkflowStatus.PENDING_REVIEW)
        .exclude(Exists(mine))
        .select_related("owner")
        .order_by("updated_at", "id")
    )


def upcoming_fires(*, now: datetime, limit: int = SHOWN) -> list[UpcomingFire]:
    """The next fire of each schedule that is not paused, soonest first."""
    fires = [
        UpcomingFire(schedule, schedule_next_fire(schedule=schedule, now=now))
        for schedule in Schedule.objects.filter(paused=False).order_by("pk")[:200]
    ]
    fires.sort(key=lambda f: (f.next_fire.at is None, f.next_fire.at or now, f.schedule.pk))
    return fires[:limit]


def home_data(*, user: AbstractBaseUser | AnonymousUser, now: datetime | None = None) -> Home:
    now = now or timezone.now()
    failed = failed_runs(now=now)
    waiting = waiting_for(user=user)
    report = health_report(components=HEALTH_COMPONENTS)
    breakers = next((c for c in report.checks if c.component == "breakers"), None)
    listed = breakers.details.get("breakers", []) if breakers is not None else []
    open_breakers = [b for b in listed if b["state"] != "closed"]
    return Home(
        failed_runs=list(failed[:SHOWN]),
        failed_total=failed.count(),
        waiting=list(waiting[:SHOWN]),
        waiting_total=waiting.count(),
        upcoming=upcoming_fires(now=now),
        health=report.checks,
        open_breakers=open_breakers,
        since=now - FAILED_WINDOW,
    )
