"""Building the pacer from settings: which store, which waits.

``FLOWPILOT_RATE_LIMIT_BACKEND`` is ``auto`` (Redis when ``FLOWPILOT_RATE_LIMIT_REDIS_URL``
is set, by default the broker's URL when the broker is Redis, else the database),
``redis``, ``database`` or ``off`` (no limit is enforced, no header paces). The waits:
``FLOWPILOT_RATE_LIMIT_MAX_SLEEP`` (a longer wait re-queues the step),
``FLOWPILOT_PACING_MAX_PAUSE`` (the longest pause an API's headers may ask for) and
``FLOWPILOT_PACING_REFRESH`` (how often a process re-reads the paused keys). A bad value
is an ``ImproperlyConfigured`` naming it.
"""

from __future__ import annotations

import functools

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from tools.ratelimit.core import Pacer, PaceStore
from tools.ratelimit.db_store import DatabasePaceStore
from tools.ratelimit.redis_store import RedisPaceStore
from tools.store_backends import store_backend


def pacing_backend() -> str:
    """The backend in use: ``redis``, ``database`` or ``off``."""
    return store_backend("FLOWPILOT_RATE_LIMIT")


def pace_store_from_settings() -> PaceStore | None:
    """The process's store for the configured backend (None when ``off``): shared by
    the process, so its pause hints are too; closing it leaves it open."""
    backend = pacing_backend()
    if backend == "off":
        return None
    if backend == "redis":
        return RedisPaceStore.shared(settings.FLOWPILOT_RATE_LIMIT_REDIS_URL)
    return _database_store()


@functools.cache
def _database_store() -> DatabasePaceStore:
    return DatabasePaceStore()


def pacer_from_settings() -> Pacer | None:
    """The pacer one run uses (None when ``off``)."""
    store = pace_store_from_settings()
    if store is None:
        return None
    waits = {
        "FLOWPILOT_RATE_LIMIT_MAX_SLEEP": settings.FLOWPILOT_RATE_LIMIT_MAX_SLEEP,
        "FLOWPILOT_PACING_MAX_PAUSE": settings.FLOWPILOT_PACING_MAX_PAUSE,
        "FLOWPILOT_PACING_REFRESH": settings.FLOWPILOT_PACING_REFRESH,
    }
    for name, value in waits.items():
        if not isinstance(value, int | float) or value < 0:
            raise ImproperlyConfigured(f"{name} must be a number of seconds >= 0, got {value!r}")
    return Pacer(
        store=store,
        max_sleep=float(settings.FLOWPILOT_RATE_LIMIT_MAX_SLEEP),
        max_pause=float(settings.FLOWPILOT_PACING_MAX_PAUSE),
        refresh=float(settings.FLOWPILOT_PACING_REFRESH),
    )
