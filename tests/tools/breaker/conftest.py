"""Fixtures for the breaker tests: both stores (Redis on loopback, the database), a
clock the test moves, and a tool pointed at the loopback server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis

from tests.celery_support import ci, redis_url
from tools.breaker.core import BreakerPolicy, CircuitBreakers
from tools.breaker.db_store import DatabaseBreakerStore
from tools.breaker.redis_store import RedisBreakerStore
from tools.models import Breaker
from tools.spec import ToolSpec


class Clock:
    """An aware UTC clock that moves only when told to."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def redis_client() -> redis.Redis:
    """The test Redis; skipped when unreachable (a failure under CI=true)."""
    client = redis.Redis.from_url(redis_url(), socket_timeout=5)
    try:
        client.ping()
    except redis.ConnectionError:
        if ci():
            pytest.fail(f"Redis at {redis_url()} is unreachable, and CI=true requires it")
        pytest.skip(f"Redis at {redis_url()} is unreachable")
    return client


@pytest.fixture
def redis_store() -> Iterator[RedisBreakerStore]:
    store = RedisBreakerStore(redis_client(), prefix=f"flowpilot-test:{uuid.uuid4().hex}:")
    yield store
    store.reset(None)
    store.close()


@pytest.fixture(params=["database", "redis"])
def store(request):
    """Each store in turn: the database one (on this pass's database; the test module
    needs a django_db mark) and Redis."""
    if request.param == "database":
        # Rows other tests' worker threads committed on their own connections (not
        # rolled back with a test's transaction) must not count here.
        Breaker.objects.all().delete()
        return DatabaseBreakerStore()
    return request.getfixturevalue("redis_store")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def breakers(store, clock) -> CircuitBreakers:
    return CircuitBreakers(
        store=store, policy=BreakerPolicy(failures=3, cooldown=30, window=300), clock=clock
    )


def flaky_spec(**breaker) -> ToolSpec:
    http: dict = {"base_url": "{{env.BASE}}", "request": {"url": "/flaky"}}
    if breaker:
        http["breaker"] = breaker
    return ToolSpec(name="flaky", http=http)
