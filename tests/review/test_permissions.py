"""No admin action, button or view lets a view-only staff user change anything.

Enumerates every action of every registered ModelAdmin (``admin.site._registry``) as
a superuser sees them, then posts each one as a staff user holding only the ``view_*``
permissions, over every row; the custom review views (approve, reject, edit as JSON,
run, archive, submit, new plan) and the change forms are posted too. After all of it,
every table holds exactly what it held before.
"""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Permission
from django.test import RequestFactory
from django.urls import reverse

from runs.models import Run
from runs.services import run_cancel, run_repeat, run_resume
from runs.state import RunStatus
from tests.factories import (
    ApprovalFactory,
    RunFactory,
    StepResultFactory,
    UserFactory,
    WorkflowFactory,
    pending_version,
    sales_report_data,
)
from tests.review.test_admin import login
from tools.models import Tool
from tools.permissions import PermissionRefused
from tools.services import tools_set_enabled
from workflows.models import WorkflowStatus
from workflows.services import workflow_archive

pytestmark = pytest.mark.django_db

APPS = ("tools", "workflows", "runs", "review", "auth")


def snapshot() -> dict[str, list[dict]]:
    """Every row of every model of the apps, in primary-key order."""
    return {
        model._meta.label: list(model.objects.order_by("pk").values())
        for app in APPS
        for model in apps.get_app_config(app).get_models()
    }


@pytest.fixture
def world(db):
    """One of everything the actions touch: tools, versions in every state, runs."""
    Tool.objects.create(name="probe", kind="http", enabled=True, spec={})
    Tool.objects.create(name="off", kind="builtin", enabled=False, spec={})
    active = ApprovalFactory().workflow
    pending = pending_version()
    draft = WorkflowFactory(data=sales_report_data(name="drafty"), status=WorkflowStatus.DRAFT)
    failed = RunFactory(workflow=active, status=RunStatus.FAILED)
    running = RunFactory(workflow=active, status=RunStatus.RUNNING)
    StepResultFactory(run=failed, step_id="load", status="failed")
    StepResultFactory(run=running, step_id="load", status="running")
    return {"active": active, "pending": pending, "draft": draft, "failed": failed}


@pytest.fixture
def viewer(db):
    user = UserFactory(username="viewer")
    user.user_permissions.set(Permission.objects.filter(codename__startswith="view_"))
    return type(user).objects.get(pk=user.pk)


def every_action() -> list[tuple[admin.ModelAdmin, str]]:
    root = UserFactory(username="root", superuser=True)
    request = RequestFactory().get("/admin/")
    request.user = root
    found = []
    admin.autodiscover()  # the admin modules load on first use (config/admin.py)
    registered = sorted(admin.site._registry.items(), key=lambda item: item[0]._meta.label)
    for _model, model_admin in registered:
        for name in sorted(model_admin.get_actions(request)):
            found.append((model_admin, name))
    return found


def test_no_admin_action_changes_anything_for_a_view_only_user(world, viewer):
    actions = every_action()
    names = {name for _, name in actions}
    assert {"archive", "disable_tools", "enable_tools", "run_again", "resume_runs"} <= names
    assert {"cancel_runs", "delete_selected"} <= names
    client = login(viewer)
    before = snapshot()

    for model_admin, name in actions:
        opts = model_admin.model._meta
        pks = [str(pk) for pk in model_admin.model.objects.values_list("pk", flat=True)]
        changelist = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
        response = client.post(
            changelist, {"action": name, "_selected_action": pks, "index": 0, "post": "yes"}
        )
        assert response.status_code in {200, 302, 403}, (opts.label, name)
        assert snapshot() == before, f"{opts.label} action {name} changed something"


def test_no_review_view_or_change_form_changes_anything_for_a_view_only_user(world, viewer):
    client = login(viewer)
    before = snapshot()
    posts = [
        ("approve", world["pending"], {}),
        ("reject", world["pending"], {"feedback": "no"}),
        ("edit", world["active"], {"definition": '{"name": "sales_report", "steps": []}'}),
        ("run", world["active"], {}),
        ("archive", world["active"], {}),
        ("submit", world["draft"], {}),
    ]
    for name, workflow, data in posts:
        path = reverse(f"admin:workflows_workflow_{name}", args=[workflow.pk])
        response = client.post(path, data)
        assert response.status_code in {200, 302, 403}, name
        assert snapshot() == before, f"the {name} view changed something"
    client.post(reverse("admin:workflows_workflow_plan"), {"goal": "anything"})
    for model in sorted(admin.site._registry, key=lambda model: model._meta.label):
        opts = model._meta
        row = model.objects.order_by("pk").first()
        if row is None:
            continue
        change = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=[row.pk])
        client.post(change, {"enabled": "on", "status": "archived", "name": "x"})
        delete = reverse(f"admin:{opts.app_label}_{opts.model_name}_delete", args=[row.pk])
        client.post(delete, {"post": "yes"})
    assert snapshot() == before


def test_state_changing_services_check_the_acting_user(world, viewer):
    before = snapshot()
    failed = world["failed"]
    refusals = [
        lambda: tools_set_enabled(tools=Tool.objects.all(), enabled=False, actor=viewer),
        lambda: workflow_archive(workflow=world["active"], actor=viewer),
        lambda: run_cancel(run=Run.objects.get(status=RunStatus.RUNNING), actor=viewer),
        lambda: run_resume(run=failed, actor=viewer),
        lambda: run_repeat(run=failed, actor=viewer),
    ]
    for call in refusals:
        with pytest.raises(PermissionRefused, match="viewer may not"):
            call()
    assert snapshot() == before
