"""``/metrics``: what every process counted (``runs.engine.metrics``) and what the
database, the breaker store and the broker hold right now, for Prometheus.

Served only when ``FLOWPILOT_METRICS`` is true (else 404), to a staff user or to a
scraper sending ``Authorization: Bearer <FLOWPILOT_METRICS_TOKEN>`` (else 401). With
``PROMETHEUS_MULTIPROC_DIR`` set, the counters are every process's, added up from
that directory (prometheus-client's multiprocess mode: the Celery workers' pool
processes, the web server's); without it, this process's own.

Read at each scrape, never stored:

- ``flowpilot_runs_in_progress{status}``: runs not finished (pending, queued, running…);
- ``flowpilot_breaker_state{host}``: 0 closed, 1 half-open, 2 open, for each host whose
  breaker has counted a failure;
- ``flowpilot_queue_length{queue}``: messages waiting in the broker, for the default
  queue and every queue a workflow or tool routes to (a Redis broker).
"""

from __future__ import annotations

import hmac
import logging
import os
from collections.abc import Iterator
from typing import Any

from celery import current_app
from django.conf import settings
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from health.checks import _broker_configured, _broker_url, _routed_or_none, _timeout
from runs.engine.metrics import process_metrics
from runs.models import Run
from runs.state import RUN_TERMINAL
from tools.breaker.selectors import breakers_list
from tools.breaker.setup import breaker_store_from_settings

BREAKER_VALUES = {"closed": 0, "half_open": 1, "open": 2}
logger = logging.getLogger("flowpilot.health")


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    if not getattr(settings, "FLOWPILOT_METRICS", False):
        raise Http404("metrics are off (FLOWPILOT_METRICS)")
    if not _allowed(request):
        response = HttpResponse("a staff login or the metrics token is needed\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="flowpilot metrics"'
        return response
    from prometheus_client import CONTENT_TYPE_LATEST

    return HttpResponse(exposition(), content_type=CONTENT_TYPE_LATEST)


def _allowed(request: HttpRequest) -> bool:
    user = getattr(request, "user", None)
    if user is not None and user.is_active and user.is_staff:
        return True
    token = str(getattr(settings, "FLOWPILOT_METRICS_TOKEN", "") or "")
    sent = request.headers.get("Authorization", "")
    scheme, _, value = sent.partition(" ")
    if not token or scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.encode(), token.encode())  # any header text: bytes


def exposition(directory: str | None = None) -> bytes:
    """The text Prometheus reads: the counters, then the state read now. ``directory``:
    the processes' shared one (default ``PROMETHEUS_MULTIPROC_DIR``; None: this process's
    own counters)."""
    from prometheus_client import CollectorRegistry, generate_latest

    counted = CollectorRegistry()
    directory = directory or os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if directory:
        from prometheus_client import multiprocess

        multiprocess.MultiProcessCollector(counted, path=directory)
        text = generate_latest(counted)
    else:
        own = process_metrics()
        text = generate_latest(own.registry) if own is not None and own.registry else b""
    now = CollectorRegistry()
    now.register(_StateCollector())
    return text + generate_latest(now)


class _StateCollector:
    """The gauges read at each scrape (see the module doc)."""

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        families = (
            ("flowpilot_runs_in_progress", "Runs not finished, by status.", "status", _runs),
            (
                "flowpilot_breaker_state",
                "Circuit breakers by host: 0 closed, 1 half-open, 2 open.",
                "host",
                _breaker_values,
            ),
            (
                "flowpilot_queue_length",
                "Messages waiting in the broker, by queue.",
                "queue",
                _queue_lengths,
            ),
        )
        for name, text, label, read in families:
            family = GaugeMetricFamily(name, text, labels=[label])
            try:
                values = read()
            except Exception as exc:  # noqa: BLE001 - one part down: the rest still served
                logger.warning("/metrics: %s not read (%s: %s)", name, type(exc).__name__, exc)
                values = {}
            for key, value in values.items():
                family.add_metric([key], value)
            yield family


def _runs() -> dict[str, float]:
    counts = (
        Run.objects.exclude(status__in=sorted(RUN_TERMINAL))
        .values("status")
        .annotate(n=Count("id"))
        .order_by("status")
    )
    return {row["status"]: row["n"] for row in counts}


def _breaker_values() -> dict[str, float]:
    return {state.host: BREAKER_VALUES.get(state.state, 0) for state in _breakers()}


def _breakers() -> list[Any]:
    store = breaker_store_from_settings()
    if store is None:
        return []
    try:
        return breakers_list(store=store)
    finally:
        close = getattr(store, "close", None)
        if close is not None:
            close()


def _queue_lengths() -> dict[str, float]:
    """Each known queue's waiting messages, on a Redis broker (a queue is a list there);
    nothing without a broker or on another transport."""
    url = _broker_url()
    if not _broker_configured() or not url.startswith(("redis://", "rediss://")):
        return {}
    import redis

    names = [str(current_app.conf.task_default_queue), *_routed_or_none()]
    client = redis.Redis.from_url(url, socket_timeout=_timeout(), socket_connect_timeout=_timeout())
    try:
        return {name: int(client.llen(name)) for name in dict.fromkeys(names)}
    finally:
        client.close()
