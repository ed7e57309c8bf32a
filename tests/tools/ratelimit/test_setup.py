"""Building the pacer from settings: the backend, the waits, bad values named."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from tools.ratelimit.db_store import DatabasePaceStore
from tools.ratelimit.redis_store import RedisPaceStore
from tools.ratelimit.setup import pacer_from_settings, pacing_backend


def test_auto_picks_redis_when_a_url_is_set(settings):
    settings.FLOWPILOT_RATE_LIMIT_BACKEND = "auto"
    settings.FLOWPILOT_RATE_LIMIT_REDIS_URL = "redis://127.0.0.1:6379/0"
    assert pacing_backend() == "redis"
    pacer = pacer_from_settings()
    assert pacer is not None
    assert isinstance(pacer.store, RedisPaceStore)
    assert pacer_from_settings().store is pacer.store  # type: ignore[union-attr]  # shared
    settings.FLOWPILOT_RATE_LIMIT_REDIS_URL = ""
    assert pacing_backend() == "database"
    assert isinstance(pacer_from_settings().store, DatabasePaceStore)  # type: ignore[union-attr]


def test_off_and_the_waits(settings):
    settings.FLOWPILOT_RATE_LIMIT_BACKEND = "off"
    assert pacer_from_settings() is None
    settings.FLOWPILOT_RATE_LIMIT_BACKEND = "database"
    settings.FLOWPILOT_RATE_LIMIT_MAX_SLEEP = 0.5
    settings.FLOWPILOT_PACING_REFRESH = 2
    pacer = pacer_from_settings()
    assert pacer is not None
    assert (pacer.max_sleep, pacer.refresh) == (0.5, 2.0)


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("FLOWPILOT_RATE_LIMIT_BACKEND", "memcached", "use one of auto, redis, database, off"),
        ("FLOWPILOT_RATE_LIMIT_MAX_SLEEP", -1, "FLOWPILOT_RATE_LIMIT_MAX_SLEEP must be"),
        ("FLOWPILOT_PACING_MAX_PAUSE", "long", "FLOWPILOT_PACING_MAX_PAUSE must be"),
    ],
)
def test_bad_values_are_named(settings, name, value, message):
    settings.FLOWPILOT_RATE_LIMIT_BACKEND = "database"
    setattr(settings, name, value)
    with pytest.raises(ImproperlyConfigured, match=message):
        pacer_from_settings()


def test_redis_without_a_url_is_refused(settings):
    settings.FLOWPILOT_RATE_LIMIT_BACKEND = "redis"
    settings.FLOWPILOT_RATE_LIMIT_REDIS_URL = ""
    with pytest.raises(ImproperlyConfigured, match="neither FLOWPILOT_RATE_LIMIT_REDIS_URL"):
        pacing_backend()
