"""Building the breakers from settings: which store, which thresholds.

``FLOWPILOT_BREAKER_BACKEND`` is ``auto`` (Redis when ``CELERY_BROKER_URL`` is a Redis
URL, else the database), ``redis``, ``database`` or ``off``. The thresholds are
``FLOWPILOT_BREAKER_FAILURES``, ``FLOWPILOT_BREAKER_COOLDOWN`` and
``FLOWPILOT_BREAKER_WINDOW``. A bad value is an ``ImproperlyConfigured`` naming it.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from tools.breaker.core import BreakerPolicy, BreakerStore, CircuitBreakers, Clock
from tools.breaker.db_store import DatabaseBreakerStore
from tools.breaker.redis_store import RedisBreakerStore
from tools.store_backends import store_backend


def breaker_backend() -> str:
    """The backend in use: ``redis``, ``database`` or ``off``."""
    return store_backend("FLOWPILOT_BREAKER")


def breaker_store_from_settings() -> BreakerStore | None:
    """The store for the configured backend (None when ``off``); the caller closes it
    (closing the process's shared Redis store, ``RedisBreakerStore.shared``, leaves it
    open for the next caller)."""
    backend = breaker_backend()
    if backend == "off":
        return None
    if backend == "redis":
        return RedisBreakerStore.shared(settings.FLOWPILOT_BREAKER_REDIS_URL)
    return DatabaseBreakerStore()


def breaker_policy_from_settings() -> BreakerPolicy:
    try:
        return BreakerPolicy(
            failures=settings.FLOWPILOT_BREAKER_FAILURES,
            cooldown=settings.FLOWPILOT_BREAKER_COOLDOWN,
            window=settings.FLOWPILOT_BREAKER_WINDOW,
        )
    except ValueError as exc:
        raise ImproperlyConfigured(f"FLOWPILOT_BREAKER_FAILURES/_COOLDOWN/_WINDOW: {exc}") from exc


def breakers_from_settings(*, clock: Clock | None = None) -> CircuitBreakers | None:
    """The breakers one run uses (None when ``off``); closed with the run's context."""
    store = breaker_store_from_settings()
    if store is None:
        return None
    breakers = CircuitBreakers(store=store, policy=breaker_policy_from_settings())
    if clock is not None:
        breakers.clock = clock
    return breakers
