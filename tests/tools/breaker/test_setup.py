"""Which store and thresholds the settings give; a bad setting names itself."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from tests.celery_support import redis_url
from tests.tools.breaker.conftest import redis_client
from tools.breaker.db_store import DatabaseBreakerStore
from tools.breaker.redis_store import RedisBreakerStore
from tools.breaker.setup import breaker_backend, breakers_from_settings


@pytest.mark.parametrize(
    ("backend", "redis_url", "expected"),
    [
        ("auto", "", "database"),
        ("auto", "redis://127.0.0.1:6379/15", "redis"),
        ("database", "redis://127.0.0.1:6379/15", "database"),
        ("off", "", "off"),
    ],
)
def test_the_backend_follows_the_settings(settings, backend, redis_url, expected):
    settings.FLOWPILOT_BREAKER_BACKEND = backend
    settings.FLOWPILOT_BREAKER_REDIS_URL = redis_url
    assert breaker_backend() == expected
    breakers = breakers_from_settings()
    if expected == "off":
        assert breakers is None
        return
    assert breakers is not None
    kind = RedisBreakerStore if expected == "redis" else DatabaseBreakerStore
    assert isinstance(breakers.store, kind)
    breakers.close()


def test_thresholds_and_clock(settings, clock):
    settings.FLOWPILOT_BREAKER_BACKEND = "database"
    settings.FLOWPILOT_BREAKER_FAILURES = 7
    settings.FLOWPILOT_BREAKER_COOLDOWN = 12.5
    settings.FLOWPILOT_BREAKER_WINDOW = 60
    breakers = breakers_from_settings(clock=clock)
    assert breakers is not None
    assert (breakers.policy.failures, breakers.policy.cooldown, breakers.policy.window) == (
        7,
        12.5,
        60,
    )
    assert breakers.clock is clock


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"FLOWPILOT_BREAKER_BACKEND": "memcached"}, "FLOWPILOT_BREAKER_BACKEND is 'memcached'"),
        (
            {"FLOWPILOT_BREAKER_BACKEND": "redis", "FLOWPILOT_BREAKER_REDIS_URL": ""},
            "neither FLOWPILOT_BREAKER_REDIS_URL",
        ),
        ({"FLOWPILOT_BREAKER_FAILURES": 0}, "FLOWPILOT_BREAKER_FAILURES.*at least 1"),
        ({"FLOWPILOT_BREAKER_COOLDOWN": -1}, "must be positive"),
    ],
)
def test_a_bad_setting_is_named(settings, changes, message):
    settings.FLOWPILOT_BREAKER_BACKEND = "database"
    for name, value in changes.items():
        setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured, match=message):
        breakers_from_settings()


def test_runs_share_the_process_redis_store_and_closing_a_run_leaves_it_open(settings, clock):
    """A run (a Celery step task) takes the process's store: no Redis client, connection
    and handshake per task; a run closing its breakers does not close the next one's."""
    redis_client()  # skipped without a test Redis
    settings.FLOWPILOT_BREAKER_BACKEND = "redis"
    settings.FLOWPILOT_BREAKER_REDIS_URL = redis_url()
    first, second = breakers_from_settings(clock=clock), breakers_from_settings(clock=clock)
    assert first is not None
    assert second is not None
    assert first.store is second.store
    first.close()
    store = second.store
    assert isinstance(store, RedisBreakerStore)
    store.record_success("shared.example")  # still connected
    assert store.client.ping()
    own = RedisBreakerStore.from_url(redis_url())  # one of its own is closed with it
    assert own is not store
    assert own.owned
    assert not store.owned
    own.close()
