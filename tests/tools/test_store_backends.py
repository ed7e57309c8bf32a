"""tools.store_backends: the breaker's and the rate limits' one way to pick a store."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from tools.store_backends import store_backend

PREFIX = "FLOWPILOT_RATE_LIMIT"


@pytest.mark.parametrize(
    ("backend", "url", "expected"),
    [
        ("auto", "redis://127.0.0.1:6379/0", "redis"),
        ("auto", "", "database"),
        ("database", "redis://127.0.0.1:6379/0", "database"),
        ("redis", "redis://127.0.0.1:6379/0", "redis"),
        ("off", "", "off"),
    ],
)
def test_the_setting_picks_the_store(settings, backend, url, expected):
    settings.FLOWPILOT_RATE_LIMIT_BACKEND = backend
    settings.FLOWPILOT_RATE_LIMIT_REDIS_URL = url
    assert store_backend(PREFIX) == expected


def test_an_unknown_backend_is_named_with_the_choices(settings):
    settings.FLOWPILOT_BREAKER_BACKEND = "memcached"
    with pytest.raises(ImproperlyConfigured) as caught:
        store_backend("FLOWPILOT_BREAKER")
    assert str(caught.value) == (
        "FLOWPILOT_BREAKER_BACKEND is 'memcached'; use one of auto, redis, database, off"
    )


def test_redis_without_a_url_names_both_settings(settings):
    settings.FLOWPILOT_RATE_LIMIT_BACKEND = "redis"
    settings.FLOWPILOT_RATE_LIMIT_REDIS_URL = ""
    with pytest.raises(ImproperlyConfigured, match="neither FLOWPILOT_RATE_LIMIT_REDIS_URL nor"):
        store_backend(PREFIX)
