"""A run's view of the database store (``KnownHosts``): healthy hosts read nothing, a
host with a row goes to the store, a breaker opened elsewhere is seen on refresh."""

from __future__ import annotations

import threading

import pytest

from tools.breaker.core import ALLOW, CLEAN, BreakerPolicy, CircuitBreakers
from tools.breaker.db_store import DatabaseBreakerStore
from tools.breaker.redis_store import RedisBreakerStore
from tools.breaker.run_view import KnownHosts, in_process_view
from tools.models import Breaker

pytestmark = pytest.mark.django_db

POLICY = BreakerPolicy(failures=1, cooldown=30)
HOST = "api.example.com:443"


@pytest.fixture
def view(clock):
    Breaker.objects.all().delete()
    view = KnownHosts(DatabaseBreakerStore())
    view.refresh()
    return view


def test_a_healthy_host_is_clean_without_a_statement(view, clock, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert view.admit(HOST, now=clock(), policy=POLICY) == CLEAN


def test_a_breaker_opened_elsewhere_is_seen_after_a_refresh(view, clock):
    DatabaseBreakerStore().record_failure(HOST, now=clock(), policy=POLICY)  # another process
    assert view.admit(HOST, now=clock(), policy=POLICY) == CLEAN  # not yet re-read
    view.refresh()
    refused = view.admit(HOST, now=clock(), policy=POLICY)
    assert not refused.allowed
    assert refused.retry_at is not None


def test_a_failure_makes_the_host_known_at_once(view, clock):
    view.record_failure(HOST, now=clock(), policy=BreakerPolicy(failures=3))
    assert view.admit(HOST, now=clock(), policy=BreakerPolicy(failures=3)) == ALLOW  # counted
    [state] = view.states()
    assert (state.host, state.state, state.failures) == (HOST, "closed", 1)


@pytest.mark.django_db(transaction=True)  # the row is committed: another thread reads it
def test_a_step_thread_closes_the_connection_it_opened(view, clock):
    """On a thread of its own, the statement for a known host is followed by closing
    that thread's connection; the coordinating thread's stays open."""
    from django.db import connection

    if connection.vendor == "sqlite":
        pytest.skip("Django never closes the in-memory SQLite test database: PostgreSQL pass")
    view.record_failure(HOST, now=clock(), policy=BreakerPolicy(failures=3))
    seen = {}

    def step_thread() -> None:
        from django.db import connection

        seen["admission"] = view.admit(HOST, now=clock(), policy=BreakerPolicy(failures=3))
        seen["open_after"] = connection.connection is not None

    thread = threading.Thread(target=step_thread)
    thread.start()
    thread.join()
    assert seen == {"admission": ALLOW, "open_after": False}


def test_only_the_database_store_gets_a_view(redis_store, clock):
    assert in_process_view(None) is None
    on_redis = CircuitBreakers(store=redis_store, clock=clock)
    assert in_process_view(on_redis) is on_redis
    on_database = in_process_view(CircuitBreakers(store=DatabaseBreakerStore(), clock=clock))
    assert isinstance(on_database.store, KnownHosts)
    assert isinstance(redis_store, RedisBreakerStore)
