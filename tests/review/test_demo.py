"""review.demo and its commands: ``demo_data`` fills a database through the real
services (a real approval and validation run, real runs), ``reset`` empties a
development one, and both refuse a database that does not look like one."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django_celery_beat.models import PeriodicTask

from review.demo import NotForDevelopment, demo_populate, development_guard
from review.models import Approval
from runs.models import Run
from schedules.models import Schedule
from tools.models import Tool
from workflows.models import Workflow

pytestmark = pytest.mark.usefixtures("output_dir")

User = get_user_model()


@pytest.fixture(autouse=True)
def development(settings):
    """A development setup (DEBUG on), as on a PostgreSQL a developer runs: the guard's
    own test turns it off."""
    settings.DEBUG = True


@pytest.mark.django_db
def test_the_demo_reviews_approves_and_runs_sales_report_the_real_way():
    report = demo_populate(runs=2)

    users = {u.username: u for u in User.objects.filter(username__startswith="demo_")}
    assert sorted(users) == ["demo_admin", "demo_reviewer", "demo_viewer"]
    assert users["demo_admin"].is_superuser
    assert users["demo_reviewer"].has_perm("workflows.approve_workflow")
    assert users["demo_reviewer"].has_perm("runs.operate_run")
    assert users["demo_viewer"].has_perm("runs.view_run")
    assert not users["demo_viewer"].has_perm("workflows.approve_workflow")
    assert report.password
    assert users["demo_viewer"].check_password(report.password)

    assert Tool.objects.filter(name="geocode_city").exists()  # an example tool file
    statuses = dict(Workflow.objects.values_list("name", "status"))
    assert statuses == {
        "sales_report": "active",
        "geo_weather": "pending_review",
        "github_intel": "pending_review",
        "travel_briefing": "pending_review",
    }
    sales = Workflow.objects.get(name="sales_report")
    (approval,) = Approval.objects.filter(workflow=sales)
    assert (approval.status, approval.approved_by.username) == ("passed", "demo_reviewer")
    assert approval.validation_run.status == "succeeded"
    assert sales.owner.username == "demo_admin"

    assert [run.status for run in report.runs] == ["succeeded", "succeeded", "failed"]
    failed = Run.objects.get(pk=report.runs[-1].pk)
    assert "no_such_sales.csv" in failed.error_summary
    schedule = Schedule.objects.get(workflow_name="sales_report")
    assert (schedule.name, schedule.cron) == ("weekday-morning", "0 7 * * 1-5")
    assert PeriodicTask.objects.get(name=f"flowpilot-schedule-{schedule.pk}").enabled  # beat


@pytest.mark.django_db
def test_running_the_demo_again_keeps_what_exists_and_adds_runs():
    demo_populate(runs=1)
    versions = Workflow.objects.count()

    again = demo_populate(runs=1, password="a-new-demo-password")

    assert again.users == [
        (name, "kept") for name in ("demo_admin", "demo_reviewer", "demo_viewer")
    ]
    assert again.password is None  # nothing generated: the given one was set
    assert User.objects.get(username="demo_admin").check_password("a-new-demo-password")
    assert Workflow.objects.count() == versions
    assert again.validation is None  # already active: not approved twice
    assert again.schedules == [("weekday-morning", "kept")]
    assert Run.objects.filter(trigger="manual").count() == 4


def test_a_database_that_is_not_for_development_is_refused_unless_forced(settings, monkeypatch):
    settings.DEBUG = False
    monkeypatch.setattr(connection, "vendor", "postgresql")

    with pytest.raises(NotForDevelopment, match="pass --force if you mean it"):
        development_guard(force=False)
    development_guard(force=True)
    settings.DEBUG = True
    development_guard(force=False)


@pytest.mark.django_db
def test_the_demo_refuses_a_negative_number_of_runs():
    with pytest.raises(ValueError, match="runs must be 0 or more"):
        demo_populate(runs=-1)
