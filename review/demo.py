"""Data to try flowpilot with (``demo_data``), and a development database wiped (``reset``).

``demo_populate`` fills a database the way a team's first week would, through the same
services people use, so every page of the admin has something real on it:

- **users**: ``demo_admin`` (superuser), ``demo_reviewer`` (may review and approve),
  ``demo_viewer`` (may look); a password is set when a user is created (the one given,
  else a random one reported once) and never changed afterwards unless one is given;
- **tools**: the example tool files (``examples/tools``) and the built-in tools;
- **workflows**: ``sales_report`` reviewed the real way: imported pending review
  (owned by ``demo_admin``), approved by ``demo_reviewer``, proved by its validation
  run (offline: it reads ``examples/data/sales.csv``), active (under an approval
  policy needing more approvers it stays pending, and no runs are made); the other
  examples (``geo_weather``, ``github_intel``, ``travel_briefing``: they call public
  APIs) wait for review, so the review pages have graphs to show;
- **runs**: ``runs`` runs of ``sales_report`` in this process, and one that fails (a
  CSV that does not exist), so the home page has a failure to show;
- **a schedule**: ``sales_report`` on weekday mornings (``0 7 * * 1-5``, UTC).

It can be run again: users, tools, workflows and the schedule that exist are kept (an
unchanged file is the same version), and more runs are added.

Both refuse a database that is not for development (``development_guard``): unless
``DJANGO_DEBUG`` is on or the database is SQLite, ``--force`` is needed.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Permission
from django.db import connection

from review.models import Approval
from review.services import workflow_approve
from runs.models import Run
from runs.services import run_create, run_execute
from runs.state import RunTrigger
from schedules.models import Schedule
from schedules.services import schedule_create
from tools.registry import ToolRegistry
from tools.services import LoadReport, tools_load_dir
from workflows.files import read_workflow_file
from workflows.models import Workflow, WorkflowStatus
from workflows.services import workflow_import

logger = logging.getLogger("flowpilot.demo")

EXAMPLES = Path(settings.BASE_DIR) / "examples"
REVIEWED = "sales_report.yaml"  # offline: approved and proved by its validation run
AWAITING_REVIEW = ("geo_weather.yaml", "github_intel.yaml", "travel_briefing.yaml")
MISSING_CSV = "data/no_such_sales.csv"  # the failed run's input
SCHEDULE = {"name": "weekday-morning", "cron": "0 7 * * 1-5", "tz": "UTC"}

# What each demo user may do (app label, codename); the admin is a superuser.
VIEW = (
    ("workflows", "view_workflow"),
    ("workflows", "view_planattempt"),
    ("runs", "view_run"),
    ("runs", "view_stepresult"),
    ("schedules", "view_schedule"),
    ("tools", "view_tool"),
)
REVIEW = (
    *VIEW,
    ("workflows", "add_workflow"),
    ("workflows", "change_workflow"),
    ("workflows", "approve_workflow"),
    ("runs", "add_run"),
    ("runs", "operate_run"),
)
USERS: tuple[tuple[str, bool, tuple[tuple[str, str], ...]], ...] = (
    ("demo_admin", True, ()),
    ("demo_reviewer", False, REVIEW),
    ("demo_viewer", False, VIEW),
)


class NotForDevelopment(Exception):
    """The database does not look like a development one."""


@dataclass
class DemoReport:
    """What ``demo_populate`` did, for the command to print."""

    users: list[tuple[str, str]] = field(default_factory=list)  # (username, created|kept)
    password: str | None = None  # the generated password of the users created, shown once
    tools: LoadReport = field(default_factory=LoadReport)
    workflows: list[tuple[str, int, str]] = field(default_factory=list)  # (name, version, status)
    validation: Run | None = None  # the validation run that proved sales_report, if made now
    runs: list[Run] = field(default_factory=list)
    schedules: list[tuple[str, str]] = field(default_factory=list)  # (name, created|kept)


def development_guard(*, force: bool) -> None:
    """Raise ``NotForDevelopment`` unless DEBUG is on, the database is SQLite, or ``force``."""
    if force or settings.DEBUG or connection.vendor == "sqlite":
        return
    name = connection.settings_dict.get("NAME") or "?"
    raise NotForDevelopment(
        f"the database `{name}` ({connection.vendor}) does not look like a development one "
        "(DJANGO_DEBUG is off and it is not SQLite); pass --force if you mean it"
    )


def demo_populate(
    *, runs: int = 5, password: str | None = None, examples: Path = EXAMPLES
) -> DemoReport:
    """Fill the database with the demo's users, tools, workflows, runs and schedule."""
    if runs < 0:
        raise ValueError("runs must be 0 or more")
    report = DemoReport()
    users = _users(report, password)
    report.tools = tools_load_dir(directory=examples / "tools")
    registry = ToolRegistry.from_db()
    reviewed = _reviewed(report, examples / REVIEWED, users, registry)
    for name in AWAITING_REVIEW:
        workflow = _imported(examples / name, owner=users["demo_admin"])
        report.workflows.append((workflow.name, workflow.version, workflow.status))
    if reviewed.status == WorkflowStatus.ACTIVE:
        for number in range(runs + 1):
            inputs = {"csv_path": MISSING_CSV} if number == runs else {}  # the last one fails
            run = run_create(
                workflow=reviewed, trigger=RunTrigger.MANUAL, inputs=inputs, registry=registry
            )
            report.runs.append(run_execute(run=run))
        report.schedules.append(_schedule(reviewed))
    return report


def _users(report: DemoReport, password: str | None) -> dict[str, Any]:
    model = get_user_model()
    generated = None if password else secrets.token_urlsafe(12)
    found: dict[str, Any] = {}
    for username, superuser, permissions in USERS:
        user = model.objects.filter(username=username).first()
        if user is None:
            user = model(username=username, email=f"{username}@example.com", is_staff=True)
            user.is_superuser = superuser
            user.set_password(password or generated)
            user.save()
            report.users.append((username, "created"))
            report.password = generated
        else:
            if password:
                user.set_password(password)
                user.save(update_fields=["password"])
            report.users.append((username, "kept"))
        for app_label, codename in permissions:
            user.user_permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )
        found[username] = model.objects.get(pk=user.pk)  # no stale permission cache
    return found


def _imported(path: Path, *, owner: Any) -> Workflow:
    """The file's newest version: imported pending review when it is new or changed."""
    workflow, _ = workflow_import(
        data=read_workflow_file(path), owner=owner, status=WorkflowStatus.PENDING_REVIEW
    )
    return workflow


def _reviewed(
    report: DemoReport, path: Path, users: dict[str, Any], registry: ToolRegistry
) -> Workflow:
    """``sales_report`` approved and proved the real way (once: an active version stays)."""
    workflow = _imported(path, owner=users["demo_admin"])
    if workflow.status == WorkflowStatus.PENDING_REVIEW:
        # Under a policy needing more approvers it stays pending: approve it in the admin.
        approval: Approval = workflow_approve(
            version=workflow, approved_by=users["demo_reviewer"], sample_inputs={},
            registry=registry,
        )  # fmt: skip
        report.validation = approval.validation_run
        workflow.refresh_from_db()
    report.workflows.append((workflow.name, workflow.version, workflow.status))
    return workflow


def _schedule(workflow: Workflow) -> tuple[str, str]:
    name = SCHEDULE["name"]
    if Schedule.objects.filter(workflow_name=workflow.name, name=name).exists():
        return name, "kept"
    schedule_create(
        workflow_name=workflow.name, name=name, cron=SCHEDULE["cron"], tz=SCHEDULE["tz"]
    )
    return name, "created"
