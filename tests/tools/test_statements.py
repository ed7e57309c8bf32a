"""``tools.statements.bound_cursor``: the engine's hot statements bound and prepared on
PostgreSQL, Django's own cursor elsewhere; logged like any query either way."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection, connections, transaction
from django.test.utils import CaptureQueriesContext

from tools.models import Breaker
from tools.statements import bound_cursor

pytestmark = pytest.mark.django_db

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = "x'); DROP TABLE tools_breaker; -- \\ ' \" $1 %s"


def _on_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("server-side binding is PostgreSQL's: runs on the PostgreSQL pass")


def _select_host(value: str) -> list[tuple]:
    with bound_cursor(connection) as cursor:
        cursor.execute("SELECT host FROM tools_breaker WHERE host = %s", [value])
        return cursor.fetchall()


def test_a_value_is_a_value_on_every_database():
    Breaker.objects.create(host=HOSTILE)
    assert _select_host(HOSTILE) == [(HOSTILE,)]
    assert _select_host("other") == []
    assert Breaker.objects.count() == 1  # nothing the value says was run


def test_elsewhere_than_postgresql_it_is_djangos_cursor():
    if connection.vendor == "postgresql":
        pytest.skip("the other databases' pass")
    with bound_cursor(connection) as cursor, connection.cursor() as plain:
        assert type(cursor.cursor) is type(plain.cursor)


def test_on_postgresql_a_statement_sent_again_is_prepared_and_still_logged():
    _on_postgresql()
    Breaker.objects.create(host="api.example.com")
    threshold = connection.connection.prepare_threshold
    assert threshold == 5  # DATABASE_PREPARE_THRESHOLD's default
    with CaptureQueriesContext(connection) as captured:
        for _ in range(threshold + 2):
            assert _select_host("api.example.com") == [("api.example.com",)]
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        prepared = [row[0] for row in cursor.fetchall()]
    assert any("FROM tools_breaker WHERE host = $1" in sql for sql in prepared), prepared
    logged = [q["sql"] for q in captured.captured_queries]
    assert len(logged) == threshold + 2
    assert all(sql and "FROM tools_breaker" in sql for sql in logged), logged


def test_on_postgresql_a_prepared_statement_survives_a_rolled_back_savepoint():
    _on_postgresql()
    for _ in range(8):
        _select_host("a")
    try:
        with transaction.atomic():
            _select_host("b")
            raise RuntimeError("roll the savepoint back")
    except RuntimeError:
        pass
    assert _select_host("a") == []  # still answers after psycopg dropped its cache


def test_on_postgresql_it_is_a_server_side_binding_cursor_wrapped_by_django():
    _on_postgresql()
    with bound_cursor(connection) as bound, connection.cursor() as plain:
        assert type(bound).__name__ == type(plain).__name__  # Django's wrapper, as any cursor
        assert type(bound.cursor).__name__ == "BoundCursor"
        assert type(plain.cursor).__name__ == "Cursor"  # Django's client-side binding


@pytest.mark.django_db(transaction=True)
def test_on_postgresql_a_dead_connection_is_replaced_before_a_bound_statement():
    """As before any statement of Django's: once a task or request has armed the health
    check (``close_old_connections``), a connection the server ended is replaced first,
    not failed on (a Celery step task's first statement is a bound one)."""
    _on_postgresql()
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        old = cursor.fetchone()[0]
    assert connection.health_check_enabled  # CONN_HEALTH_CHECKS, as config.settings sets it
    other = connections.create_connection("default")  # a restart or a failover, from outside
    try:
        with other.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(%s)", [old])
    finally:
        other.close()
    connection.close_if_unusable_or_obsolete()  # arms the check, as around every task
    with bound_cursor(connection) as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != old
        assert type(cursor.cursor).__name__ == "BoundCursor"
    with connection.cursor() as plain:
        assert type(plain.cursor).__name__ == "Cursor"  # the factory is set back


@pytest.mark.parametrize(("value", "expected"), [(None, "5"), ("0", "None"), ("12", "12")])
def test_database_prepare_threshold_sets_the_connections_threshold(value, expected):
    """Read by ``config.settings`` for a PostgreSQL ``DATABASE_URL`` (0: never prepare)."""
    env = {**os.environ, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/flowpilot"}
    env.pop("DATABASE_PREPARE_THRESHOLD", None)
    if value is not None:
        env["DATABASE_PREPARE_THRESHOLD"] = value
    code = (
        "from django.conf import settings; "
        "print(settings.DATABASES['default']['OPTIONS']['prepare_threshold'])"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env={**env, "DJANGO_SETTINGS_MODULE": "config.settings"},
        cwd=ROOT, capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == expected
