"""Moving Approval from runs to review changes no table and no row.

The test database is taken back to before the move (runs 0004, no review app),
an approval is stored through the old ``runs.Approval`` model, and the database is
migrated forward: the same row is there as a ``review.Approval``. The suite runs
this on SQLite and on PostgreSQL.
"""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from review.models import Approval
from runs.models import RunTrigger

BEFORE = [
    ("runs", "0004_in_flight_lease_index"),
    ("review", None),
    ("workflows", "0002_plans_and_approvals"),
]


def _migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state([t for t in targets if t[1] is not None]).apps


@pytest.mark.django_db(transaction=True)
def test_migrating_forward_keeps_the_approvals_stored_in_runs():
    old = _migrate(BEFORE)
    assert "runs_approval" in connection.introspection.table_names()
    Workflow = old.get_model("workflows", "Workflow")
    workflow = Workflow.objects.create(
        name="kept", version=1, status="active", definition={}, definition_hash="h" * 64
    )
    run = old.get_model("runs", "Run").objects.create(
        workflow=workflow, definition_hash="h" * 64, trigger=RunTrigger.VALIDATION
    )
    stored = old.get_model("runs", "Approval").objects.create(
        workflow=workflow, definition_hash="h" * 64, validation_run=run, status="passed",
        sample_inputs={"city": "Lisbon"},
    )  # fmt: skip

    _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())  # every app's latest

    moved = Approval.objects.get()
    assert (moved.pk, moved.workflow_id, moved.validation_run_id) == (
        stored.pk, workflow.pk, run.pk,
    )  # fmt: skip
    assert (moved.status, moved.sample_inputs) == ("passed", {"city": "Lisbon"})
    assert moved.validation_run.review_approval == moved
    assert Approval._meta.db_table == "runs_approval"
