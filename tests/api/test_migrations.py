"""Moving the API's models to their rooms changes no table and no row.

``PlanRequest`` moved to ``review`` and ``WebhookTrigger`` / ``WebhookDelivery`` to
``triggers`` (api 0003, review 0005, triggers 0001). The test database is taken back
to before the move, rows are stored through the old ``api`` models and a permission
is granted on the old content type; migrated forward, the same rows are read through
the new models and the grant holds under the new app label. The suite runs this on
SQLite and on PostgreSQL.
"""

import pytest
from django.contrib.auth.models import Permission
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from review.models import PlanRequest
from triggers.models import WebhookDelivery, WebhookTrigger

BEFORE = [
    ("api", "0002_plan_request_questions"),
    ("review", "0004_approval_workflow_pins"),
    ("triggers", None),
]
TABLES = {"api_planrequest", "api_webhooktrigger", "api_webhookdelivery"}


def _migrate(targets):
    """Migrate to ``targets`` (other apps stay at their latest); the models as they are then."""
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    moved = {app for app, _ in targets}
    others = [leaf for leaf in executor.loader.graph.leaf_nodes() if leaf[0] not in moved]
    return executor.loader.project_state(others + [t for t in targets if t[1]]).apps


def _store_on_the_old_schema(old) -> dict:
    workflow = old.get_model("workflows", "Workflow").objects.create(
        name="kept", version=1, status="active", definition={}, definition_hash="h" * 64
    )
    run = old.get_model("runs", "Run").objects.create(
        workflow=workflow, definition_hash="h" * 64, trigger="webhook"
    )
    user = old.get_model("auth", "User").objects.create(username="operator")
    plan = old.get_model("api", "PlanRequest").objects.create(
        kind="revise", status="succeeded", feedback="more rows", based_on=workflow,
        workflow=workflow, attempts=[3, 4], requested_by=user,
    )  # fmt: skip
    trigger = old.get_model("api", "WebhookTrigger").objects.create(
        workflow_name="kept", public_id="p" * 32, secret="s" * 64, created_by=user
    )
    delivery = old.get_model("api", "WebhookDelivery").objects.create(
        trigger=trigger, signature="0" * 64, timestamp=1700000000, run=run
    )
    content_type = old.get_model("contenttypes", "ContentType").objects.get(
        app_label="api", model="webhooktrigger"
    )
    permission = old.get_model("auth", "Permission").objects.get(
        content_type=content_type, codename="view_webhooktrigger"
    )
    user.user_permissions.add(permission)
    return {"plan": plan.pk, "trigger": trigger.pk, "delivery": delivery.pk, "run": run.pk}


@pytest.mark.django_db(transaction=True)
def test_migrating_forward_keeps_plan_requests_and_webhooks_stored_by_the_api():
    old = _migrate(BEFORE)
    assert set(connection.introspection.table_names()) >= TABLES
    stored = _store_on_the_old_schema(old)

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # every app's latest

    plan = PlanRequest.objects.get()
    assert (plan.pk, plan.kind, plan.feedback, plan.attempts) == (
        stored["plan"], "revise", "more rows", [3, 4],
    )  # fmt: skip
    assert plan.based_on_id == plan.workflow_id is not None
    delivery = WebhookDelivery.objects.select_related("trigger").get()
    assert (delivery.pk, delivery.run_id, delivery.trigger_id) == (
        stored["delivery"], stored["run"], stored["trigger"],
    )  # fmt: skip
    assert WebhookTrigger.objects.get().deliveries.get() == delivery
    assert {PlanRequest._meta.db_table, WebhookTrigger._meta.db_table} < TABLES


@pytest.mark.django_db(transaction=True)
def test_a_permission_granted_on_the_old_model_holds_on_the_moved_one():
    old = _migrate(BEFORE)
    _store_on_the_old_schema(old)

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())

    ContentType.objects.clear_cache()
    assert not ContentType.objects.filter(app_label="api", model="webhooktrigger").exists()
    granted = Permission.objects.filter(user__username="operator")
    assert [(p.content_type.app_label, p.codename) for p in granted] == [
        ("triggers", "view_webhooktrigger")
    ]
