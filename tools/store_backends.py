"""Which shared store a per-host mechanism uses: the circuit breaker
(``FLOWPILOT_BREAKER_*``) and the rate limits (``FLOWPILOT_RATE_LIMIT_*``) choose the
same way, from a ``<PREFIX>_BACKEND`` setting and a ``<PREFIX>_REDIS_URL`` one."""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

BACKENDS = ("auto", "redis", "database", "off")


def store_backend(prefix: str) -> str:
    """The backend ``<prefix>_BACKEND`` selects: ``redis``, ``database`` or ``off``
    (``auto``: Redis when ``<prefix>_REDIS_URL`` is set, else the database)."""
    name, url = f"{prefix}_BACKEND", f"{prefix}_REDIS_URL"
    backend = getattr(settings, name)
    if backend not in BACKENDS:
        raise ImproperlyConfigured(f"{name} is {backend!r}; use one of {', '.join(BACKENDS)}")
    if backend == "auto":
        return "redis" if getattr(settings, url) else "database"
    if backend == "redis" and not getattr(settings, url):
        raise ImproperlyConfigured(
            f"{name} is 'redis' but neither {url} nor a redis:// CELERY_BROKER_URL is set"
        )
    return str(backend)
