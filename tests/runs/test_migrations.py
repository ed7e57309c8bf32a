"""Data migrations of the runs app, run forwards over rows that existed before them."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from tests.factories import RunFactory, StepResultFactory, WorkflowFactory

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


def step_indexes() -> dict[str, tuple[tuple[str, ...], bool]]:
    """The step table's indexes: name → (columns, unique), primary key aside (a unique
    constraint is reported apart from the indexes, on both databases)."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, "runs_stepresult")
    return {
        name: (tuple(info["columns"]), bool(info["unique"]))
        for name, info in found.items()
        if (info["index"] or info["unique"]) and not info["primary_key"]
    }


def test_the_step_table_keeps_only_the_indexes_a_query_uses():
    """Each transition rewrites a step row and adds an entry to every index: the
    table has the unique (run, step id) index and the two partial ones, nothing else."""
    indexes = step_indexes()

    assert sorted(indexes.values()) == [
        (("lease_expires_at",), False),  # step_in_flight_lease_idx (partial)
        (("run_id",), False),  # step_failed_by_run_idx (partial)
        (("run_id", "step_id"), True),  # one_result_per_run_step
    ]
    assert {"step_failed_by_run_idx", "step_in_flight_lease_idx"} <= indexes.keys()


def test_dropping_the_step_indexes_keeps_the_rows_and_is_reversible():
    step = StepResultFactory(run=RunFactory(), step_id="kept", status="failed")
    before = [("runs", "0017_run_started_by")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        restored = [columns for columns, unique in step_indexes().values() if not unique]
        assert restored.count(("run_id",)) == 2  # its own index, and the partial one
        assert ("status",) in restored
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    assert ("status",) not in [columns for columns, _ in step_indexes().values()]
    step.refresh_from_db()
    assert (step.step_id, step.status) == ("kept", "failed")
