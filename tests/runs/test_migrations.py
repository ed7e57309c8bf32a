"""Data migrations of the runs app, run forwards over rows that existed before them."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.factories import WorkflowFactory

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_UUID = [("runs", "0005_approval_moves_to_review")]
WITH_UUID = [("runs", "0006_run_uuid")]


def test_run_uuid_gives_every_existing_run_its_own_uuid():
    workflow = WorkflowFactory()
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE_UUID)
    try:
        old_run = executor.loader.project_state(BEFORE_UUID).apps.get_model("runs", "Run")
        for _ in range(3):
            old_run.objects.create(
                workflow_id=workflow.pk, definition_hash="h", trigger="cli", inputs={}
            )
        executor = MigrationExecutor(connection)
        executor.migrate(WITH_UUID)
        new_run = executor.loader.project_state(WITH_UUID).apps.get_model("runs", "Run")
        uuids = list(new_run.objects.order_by("pk").values_list("uuid", flat=True))
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert len(uuids) == 3
    assert None not in uuids
    assert len(set(uuids)) == 3
