"""Fixtures for the rate-limit tests: both stores (Redis on loopback, the database), a
clock the test moves and a sleep that moves it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.tools.breaker.conftest import redis_client
from tools.models import RateLimitSlot
from tools.ratelimit.core import Pacer
from tools.ratelimit.db_store import DatabasePaceStore
from tools.ratelimit.redis_store import RedisPaceStore

START = 1_800_000_000.0  # a Unix time, in seconds


class Clock:
    """Unix seconds that move only when told to (or when the pacer sleeps)."""

    def __init__(self) -> None:
        self.now = START
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(round(seconds, 3))
        self.now += seconds


@pytest.fixture
def redis_store() -> Iterator[RedisPaceStore]:
    store = RedisPaceStore(redis_client(), prefix=f"flowpilot-test:{uuid.uuid4().hex}:")
    yield store
    store.reset(None)
    store.close()


@pytest.fixture(params=["database", "redis"])
def store(request):
    """Each store in turn (the test module needs a django_db mark)."""
    if request.param == "database":
        RateLimitSlot.objects.all().delete()
        return DatabasePaceStore()
    return request.getfixturevalue("redis_store")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def pacer(store, clock) -> Pacer:
    return Pacer(store=store, max_sleep=5.0, refresh=1.0, clock=clock, sleep=clock.sleep)
