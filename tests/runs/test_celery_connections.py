"""A Celery worker keeps its database connection across tasks (``CELERY_DB_REUSE_MAX``).

A real ``celery worker`` (prefork, one pool process, so consecutive tasks run in the
same process) on Redis, against the test database on PostgreSQL. A trigger on the step
table records ``pg_backend_pid()`` of every claim (``queued`` → ``running``, or
``pending`` → ``running`` for a step claimed by its parent's settle): the backend
that served the task. With the project's settings every task of the pool
process is served by one backend; with ``CELERY_DB_REUSE_MAX=0`` (Celery's default:
the Django fixup closes the connection around every task) each task opens its own,
which shows the test can tell the two apart.
"""

from __future__ import annotations

import pytest
from django.db import connection

from runs.models import Run
from runs.services import run_create, run_enqueue
from tests.celery_support import fan_out_flow, import_flow, start_cluster, wait_until

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.postgres,
    pytest.mark.celery,
]

WIDTH = 6  # six step tasks, then the join (run in the last one's task)


@pytest.fixture(scope="module")
def solo_cluster(django_db_setup, tmp_path_factory):
    """A cluster with no worker yet: each test starts the one it needs."""
    with start_cluster(tmp_path_factory.mktemp("celery-conn"), workers=()) as cluster:
        yield cluster


@pytest.fixture
def claim_backends():
    """Record the backend pid of every claim in a table; read it with the returned function."""
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE test_claim_backends (step_result_id bigint, pid integer)")
        cursor.execute(
            "CREATE FUNCTION test_record_claim() RETURNS trigger AS $$ BEGIN "
            "INSERT INTO test_claim_backends VALUES (NEW.id, pg_backend_pid()); RETURN NEW; "
            "END $$ LANGUAGE plpgsql"
        )
        cursor.execute(
            "CREATE TRIGGER test_record_claim AFTER UPDATE ON runs_stepresult FOR EACH ROW "
            "WHEN (OLD.status IN ('queued', 'pending') AND NEW.status = 'running') "
            "EXECUTE FUNCTION test_record_claim()"
        )

    def pids() -> list[int]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT pid FROM test_claim_backends ORDER BY step_result_id")
            return [pid for (pid,) in cursor.fetchall()]

    try:
        yield pids
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS test_record_claim ON runs_stepresult")
            cursor.execute("DROP FUNCTION IF EXISTS test_record_claim()")
            cursor.execute("DROP TABLE IF EXISTS test_claim_backends")


def run_fan_out(tag: str) -> Run:
    workflow = import_flow(fan_out_flow(f"conn_{tag}", WIDTH))
    run = run_enqueue(run=run_create(workflow=workflow, trigger="api", inputs={"tag": tag}))

    def done() -> bool:
        run.refresh_from_db()
        return run.status in {"succeeded", "failed", "cancelled"}

    wait_until(done, timeout=60, what=f"run {run.pk} to finish")
    assert run.status == "succeeded", run.error_summary
    return run


def test_consecutive_tasks_of_a_worker_share_one_database_connection(
    solo_cluster, echo_tools, claim_backends
):
    solo_cluster.start_worker("solo", concurrency=1)
    try:
        run_fan_out("kept")
    finally:
        solo_cluster.stop("solo")

    pids = claim_backends()
    assert len(pids) == WIDTH + 1
    assert len(set(pids)) == 1, f"claims came from backends {pids}"


def test_without_db_reuse_max_each_task_opens_its_own_connection(
    solo_cluster, echo_tools, claim_backends
):
    solo_cluster.start_worker("closing", concurrency=1, env={"CELERY_DB_REUSE_MAX": "0"})
    try:
        run_fan_out("closed")
    finally:
        solo_cluster.stop("closing")

    pids = claim_backends()
    assert len(pids) == WIDTH + 1
    assert len(set(pids)) == WIDTH  # one per task; the join shares its parent's task
