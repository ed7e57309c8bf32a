"""No list page's queries grow with its rows: every admin changelist and API list.

Each page is read with 2 rows of its model (each with its related rows: a run's
workflow and parent, a schedule's beat task, …), then with 10: the number of queries
must be the same, and at most ``MAX_QUERIES``. The pages come from the admin site's
registry and the API's URL conf, so a new model admin or list endpoint fails here
until it has a row maker below. Counts, not times.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib import admin
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.db.models import Model
from django.test.utils import CaptureQueriesContext
from django.urls import URLPattern, reverse
from rest_framework.authtoken.models import Token

from api import urls as api_urls
from review.models import ApprovalPolicy, ApprovalStatus
from runs.models import RunTrigger
from schedules.models import RetentionSweep
from tests.api.conftest import client_for
from tests.factories import (
    ApprovalFactory,
    ApprovalPolicyFactory,
    DeliveryFactory,
    LLMCallFactory,
    PlanAttemptFactory,
    RunFactory,
    ScheduleFactory,
    ScheduleFireFactory,
    StepResultFactory,
    ToolFactory,
    UserFactory,
    WorkflowFactory,
    pending_version,
    sales_report_data,
)
from tools.models import Breaker, Credential, ToolSource
from triggers.models import EventTrigger, TriggerEvent
from triggers.webhooks import webhook_create
from workflows.models import WorkflowStatus

MAX_QUERIES = 20  # of any list page, whatever its rows
FEW, MANY = 2, 10


def _user(i: int) -> None:
    user = UserFactory(username=f"listed{i}")
    user.groups.add(Group.objects.get_or_create(name=f"group{i % 3}")[0])


def _group(i: int) -> None:
    group = Group.objects.create(name=f"listed{i}")
    group.permissions.set(Permission.objects.order_by("pk")[:3])


def _run(i: int) -> None:
    """A run someone started (with a model call: its cost), its child, and a restart of it
    (reading both versions)."""
    parent = RunFactory(started_by=UserFactory(username=f"starter{i}"))
    step = StepResultFactory(run=parent, step_id="fetch_sales")
    LLMCallFactory(run=parent, step_id="fetch_sales")
    RunFactory(parent_run=parent, parent_step=step, trigger=RunTrigger.WORKFLOW)
    RunFactory(
        restarted_from=parent, restarted_from_step="fetch_sales", started_by=parent.started_by
    )


def _event(i: int) -> None:
    """An event a trigger took: the finished run and the run it started."""
    TriggerEvent.objects.create(
        workflow_name="report", position=0, event_key=f"run:{i}", outcome="started",
        source_run=RunFactory(), run=RunFactory(trigger=RunTrigger.EVENT),
    )  # fmt: skip


def _approval(i: int) -> None:
    """A request of an approval step, decided by one person, its run started by another."""
    from runs.models import ApprovalDecision, ApprovalRequest, StepResult

    run = RunFactory(started_by=UserFactory(username=f"author{i}"))
    step = StepResult.objects.create(run=run, step_id="confirm", status="waiting")
    request = ApprovalRequest.objects.create(
        run=run, step_result=step, step_id="confirm", approvers=["alice"], required=2,
        author=run.started_by,
    )  # fmt: skip
    ApprovalDecision.objects.create(request=request, username=f"d{i}", approved=True, via="api")


def _workflow(i: int) -> None:
    """A version in review with an approval, and an approved one with its approver."""
    ApprovalFactory(workflow=pending_version(name=f"flow_{i}"), status=ApprovalStatus.PENDING)
    if i % 2:
        ApprovalPolicyFactory(workflow_name=f"flow_{i}")
    ApprovalFactory(workflow=WorkflowFactory(data=sales_report_data(name=f"done_{i}")))


ADMIN_ROWS: dict[str, Callable[[int], object]] = {
    "auth.Group": _group,
    "auth.User": _user,
    "authtoken.TokenProxy": lambda i: Token.objects.create(user=UserFactory(username=f"t{i}")),
    "notifications.Delivery": lambda i: DeliveryFactory(),
    "review.ApprovalPolicy": lambda i: ApprovalPolicyFactory(),
    "runs.ApprovalRequest": lambda i: _approval(i),
    "runs.LLMCall": lambda i: LLMCallFactory(endpoint=f"endpoint{i}"),
    "runs.Run": _run,
    "schedules.RetentionSweep": lambda i: RetentionSweep.objects.create(
        started_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=i), total=i
    ),
    "schedules.Schedule": lambda i: ScheduleFactory(),
    "schedules.ScheduleFire": lambda i: ScheduleFireFactory(),
    "triggers.EventTrigger": lambda i: EventTrigger.objects.create(
        workflow_name=f"report{i}", position=0, kind="on_workflow", source=f"nightly{i}"
    ),
    "triggers.TriggerEvent": _event,
    "tools.Breaker": lambda i: Breaker.objects.create(host=f"api{i}.example.com:443"),
    # No secret value: the list shows which are set, and needs no key to do so.
    "tools.Credential": lambda i: Credential.objects.create(name=f"cred{i}", type="bearer"),
    "tools.Tool": lambda i: ToolFactory(),
    "tools.ToolRevision": lambda i: ToolFactory(),
    "tools.ToolSource": lambda i: ToolSource.objects.create(
        kind="mcp", name=f"server{i}", location=f"/srv/tools/server{i}.yaml", tools=["a", "b"]
    ),
    "workflows.PlanAttempt": lambda i: PlanAttemptFactory(),
    "workflows.Workflow": _workflow,
}


def _registered() -> list[type[Model]]:
    admin.autodiscover()  # the admin modules load on first use (config/admin.py)
    return sorted(admin.site._registry, key=lambda model: model._meta.label)


def _queries(client, url: str) -> int:
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(captured)


def _counts(client, url: str, make: Callable[[int], object]) -> tuple[int, int]:
    """Queries of ``url`` with FEW rows made, then with MANY."""
    for i in range(FEW):
        make(i)
    few = _queries(client, url)
    for i in range(FEW, MANY):
        make(i)
    return few, _queries(client, url)


def test_every_registered_model_admin_has_a_row_maker():
    assert sorted(m._meta.label for m in _registered()) == sorted(ADMIN_ROWS)


@pytest.mark.parametrize("label", sorted(ADMIN_ROWS))
def test_an_admin_changelist_makes_as_many_queries_for_10_rows_as_for_2(label, client, db):
    model = next(m for m in _registered() if m._meta.label == label)
    client.force_login(UserFactory(username="root", superuser=True))
    url = reverse(f"admin:{model._meta.app_label}_{model._meta.model_name}_changelist")
    few, many = _counts(client, url, ADMIN_ROWS[label])
    assert model._default_manager.count() >= MANY
    assert many == few, f"{label}: {few} queries with {FEW} rows, {many} with {MANY}"
    assert many <= MAX_QUERIES


def _home_rows(i: int) -> None:
    """What the home page lists: a failed run, a version in review, an active schedule."""
    RunFactory(status="failed", error_summary=f"step `fetch_sales` failed ({i})")
    pending_version(name=f"review_{i}")
    ScheduleFactory()


def test_the_home_page_makes_as_many_queries_for_10_rows_as_for_2(client, db):
    client.force_login(UserFactory(username="root", superuser=True))
    few, many = _counts(client, reverse("admin:index"), _home_rows)
    assert many == few, f"home: {few} queries with {FEW} rows of each list, {many} with {MANY}"
    assert many <= MAX_QUERIES


def test_the_admin_lists_no_django_celery_beat_model(client, db):
    """Beat reads its tables; people schedule through flowpilot's Schedules only."""
    assert not [m for m in _registered() if m._meta.app_label == "django_celery_beat"]
    client.force_login(UserFactory(username="root", superuser=True))
    page = client.get(reverse("admin:index")).content.decode()
    assert "Periodic tasks" not in page
    assert "Crontabs" not in page
    assert "/admin/django_celery_beat/" not in page
    assert '<a href="/admin/">flowpilot</a>' in page


# --- the API's lists ------------------------------------------------------------------------

LIST_ACTIONS = {"list", "versions", "fires"}


def _api_lists() -> dict[str, URLPattern]:
    """Each route of the API whose GET reads a list, by its URL name."""
    return {
        pattern.name: pattern
        for pattern in api_urls.urlpatterns
        if isinstance(pattern, URLPattern)
        and pattern.name
        and getattr(pattern.callback, "actions", {}).get("get") in LIST_ACTIONS
    }


def _plan(i: int) -> None:
    PlanAttemptFactory(created_by=None)


def _webhook(i: int) -> None:
    WorkflowFactory(data=sales_report_data(name=f"hooked_{i}"), status=WorkflowStatus.ACTIVE)
    webhook_create(workflow_name=f"hooked_{i}", user=UserFactory(username=f"hooker{i}"))


def _fire(i: int) -> None:
    ScheduleFireFactory(schedule=_the_schedule())


def _the_schedule():
    from schedules.models import Schedule

    return Schedule.objects.filter(name="listed").first() or ScheduleFactory(
        name="listed", workflow=WorkflowFactory(status=WorkflowStatus.ACTIVE)
    )


def _version(i: int) -> None:
    WorkflowFactory(data=sales_report_data(description=f"version {i}"))


def _tool_version(i: int) -> None:
    from tools.pins import tool_revision_record
    from tools.spec import ToolSpec

    http = {"base_url": "https://api.example.com", "request": {"url": f"/v{i}"}}
    tool_revision_record(spec=ToolSpec.model_validate({"name": "listed_tool", "http": http}))


API_ROWS: dict[str, tuple[Callable[[int], object], dict[str, object]]] = {
    "tool-list": (lambda i: ToolFactory(), {}),
    "tool-versions": (_tool_version, {"name": "listed_tool"}),
    "workflow-list": (_workflow, {}),
    "workflow-versions": (_version, {"name": "sales_report"}),
    "plan-list": (_plan, {}),
    "run-list": (_run, {}),
    "webhook-list": (_webhook, {}),
    "schedule-list": (lambda i: ScheduleFactory(), {}),
    "schedule-fires": (_fire, {"workflow": "sales_report", "name": "listed"}),
    "credential-list": (lambda i: Credential.objects.create(name=f"cred{i}", type="bearer"), {}),
    "trigger-list": (ADMIN_ROWS["triggers.EventTrigger"], {}),
    "approval-list": (_approval, {}),
    "trigger-event-list": (_event, {}),
}


def test_every_api_list_has_a_row_maker():
    assert sorted(_api_lists()) == sorted(API_ROWS)


@pytest.mark.parametrize("name", sorted(API_ROWS))
def test_an_api_list_makes_as_many_queries_for_10_rows_as_for_2(name, db):
    make, kwargs = API_ROWS[name]
    api = client_for(UserFactory(username="root", superuser=True))
    WorkflowFactory(status=WorkflowStatus.ACTIVE)  # sales_report, for the routes that name it
    if name == "schedule-fires":
        _the_schedule()
    url = reverse(name, kwargs=kwargs)
    few, many = _counts(api, url, make)
    assert many == few, f"{name}: {few} queries with {FEW} rows, {many} with {MANY}"
    assert many <= MAX_QUERIES


def test_the_policy_factory_names_its_workflow(db):
    """The row makers above make what they say (a policy is a row of its own)."""
    ApprovalPolicyFactory()
    assert ApprovalPolicy.objects.get().updated_by is not None
