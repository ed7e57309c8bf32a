"""The admin's home page: failed runs of the last 24 h, versions waiting for my
approval, next fires, open breakers and health — each linked to its page."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils import timezone

from health.home import home_data, waiting_for
from review.models import ApprovalStatus
from runs.models import Run, RunStatus
from tests.factories import (
    ApprovalFactory,
    RunFactory,
    ScheduleFactory,
    UserFactory,
    pending_version,
)
from tools.breaker.core import BreakerPolicy
from tools.breaker.db_store import DatabaseBreakerStore

pytestmark = pytest.mark.django_db


def test_the_home_lists_what_failed_waits_fires_and_is_open(client):
    root = UserFactory(username="root", superuser=True)
    failed = RunFactory(status=RunStatus.FAILED, error_summary="step `fetch` failed (http_error)")
    old = RunFactory(status=RunStatus.FAILED, error_summary="long ago")
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=2))
    RunFactory(status=RunStatus.SUCCEEDED)
    waiting = pending_version(name="digest")
    approved = pending_version(name="approved_by_me")
    ApprovalFactory(workflow=approved, approved_by=root, status=ApprovalStatus.PENDING)
    schedule = ScheduleFactory()
    DatabaseBreakerStore().record_failure(
        "api.example.com:443", now=timezone.now(), policy=BreakerPolicy(failures=1, cooldown=60)
    )

    home = home_data(user=root)
    assert [r.pk for r in home.failed_runs] == [failed.pk]
    assert [w.pk for w in home.waiting] == [waiting.pk]  # not the one I approved already
    assert [f.schedule.pk for f in home.upcoming] == [schedule.pk]
    assert [b["host"] for b in home.open_breakers] == ["api.example.com:443"]

    client.force_login(root)
    page = client.get(reverse("admin:index")).content.decode()
    assert "Failed in the last 24 h" in page
    assert reverse("admin:runs_run_change", args=[failed.pk]) in page
    assert "step `fetch` failed (http_error)" in page
    assert "long ago" not in page
    assert reverse("admin:workflows_workflow_change", args=[waiting.pk]) in page
    assert reverse("admin:schedules_schedule_change", args=[schedule.pk]) in page
    assert "api.example.com:443" in page
    assert '<a href="/admin/">flowpilot</a>' in page


def test_a_user_without_view_permissions_sees_no_runs_or_versions(client):
    RunFactory(status=RunStatus.FAILED, error_summary="secret failure")
    staff = get_user_model().objects.create_user("staff", password="x", is_staff=True)
    pending_version(name="digest")
    client.force_login(staff)
    page = client.get(reverse("admin:index")).content.decode()
    assert "secret failure" not in page
    assert "Waiting for your approval" not in page
    assert "Failed in the last 24 h" not in page
    assert waiting_for(user=staff).count() == 1  # the list; the page hides it from this user
