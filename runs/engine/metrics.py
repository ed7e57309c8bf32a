"""Metrics of runs, for Prometheus and over OTLP; off unless configured.

What every process that runs steps counts (the web process, a ``runflow`` command, each
Celery worker process), from the same records the traces describe:

| metric | type | labels |
|---|---|---|
| ``flowpilot_runs_finished_total`` | counter | workflow, status, trigger |
| ``flowpilot_run_duration_seconds`` | histogram | workflow, status |
| ``flowpilot_step_tries_total`` | counter | workflow, tool, status |
| ``flowpilot_step_try_duration_seconds`` | histogram | workflow, tool |
| ``flowpilot_step_retries_total`` | counter | workflow, tool (a try after the first) |
| ``flowpilot_tool_calls_total`` | counter | tool, kind, outcome (ok, error type) |
| ``flowpilot_http_responses_total`` | counter | tool, status (the HTTP status: ``429`` included) |
| ``flowpilot_rate_limit_waits_total`` | counter | tool, where (``in_place``, ``requeued``) |
| ``flowpilot_rate_limit_wait_seconds_total`` | counter | tool, where |
| ``flowpilot_llm_calls_total`` | counter | workflow, endpoint, model |
| ``flowpilot_llm_tokens_total`` | counter | workflow, model, type (prompt, completion) |
| ``flowpilot_llm_cost_usd_total`` | counter | workflow, model |

A rate-limit wait is ``in_place`` when the call slept before going, ``requeued`` when
the try was put back to wait its turn. A "tool" label of a step that calls no tool is
its kind (``llm``, ``transform``...).
Labels are names from definitions and the tool registry: bounded by what is
configured, never a value of the data. What only the database knows at any moment —
runs in progress by status, the circuit breakers' states, the Celery queues' depth —
is read when Prometheus scrapes (``health.metrics``).

**Prometheus** (``FLOWPILOT_METRICS=true``): ``/metrics`` serves them. With several
processes (Celery's prefork pool, a web server's workers) set ``PROMETHEUS_MULTIPROC_DIR``
to a directory every process may write: prometheus-client's multiprocess mode keeps
each process's values in files there, and ``/metrics`` adds them up. **OTLP**: the same
counters and histograms are sent by every process through the OpenTelemetry metrics
SDK when the standard variables ask for an exporter (``OTEL_METRICS_EXPORTER=otlp``,
or an OTLP endpoint: ``config.telemetry``), every ``OTEL_METRIC_EXPORT_INTERVAL``.

Off (the default), a run's context has no metrics object and each hook is one ``is None``
test. The object is one per process (as the tracer provider), made on first use.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from django.conf import settings

from tools.llm.prices import PICO

logger = logging.getLogger("flowpilot.engine")

DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
RUN_BUCKETS = (0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 14400)

# name -> (type, description, labels, buckets)
INSTRUMENTS: dict[str, tuple[str, str, tuple[str, ...], tuple[float, ...]]] = {
    "flowpilot_runs_finished": (
        "counter", "Runs that finished.", ("workflow", "status", "trigger"), ()
    ),
    "flowpilot_run_duration_seconds": (
        "histogram", "Runs from start to end.", ("workflow", "status"), RUN_BUCKETS
    ),
    "flowpilot_step_tries": (
        "counter", "Tries of steps.", ("workflow", "tool", "status"), ()
    ),
    "flowpilot_step_try_duration_seconds": (
        "histogram", "Tries of steps, each.", ("workflow", "tool"), DURATION_BUCKETS
    ),
    "flowpilot_step_retries": (
        "counter", "Tries after the first.", ("workflow", "tool"), ()
    ),
    "flowpilot_tool_calls": (
        "counter", "Calls of tools.", ("tool", "kind", "outcome"), ()
    ),
    "flowpilot_http_responses": (
        "counter", "HTTP answers to tool calls.", ("tool", "status"), ()
    ),
    "flowpilot_rate_limit_waits": (
        "counter", "Waits for a rate limit's slot.", ("tool", "where"), ()
    ),
    "flowpilot_rate_limit_wait_seconds": (
        "counter", "Seconds waited for rate limits.", ("tool", "where"), ()
    ),
    "flowpilot_llm_calls": (
        "counter", "Model calls answered.", ("workflow", "endpoint", "model"), ()
    ),
    "flowpilot_llm_tokens": (
        "counter", "Tokens of model calls.", ("workflow", "model", "type"), ()
    ),
    "flowpilot_llm_cost_usd": (
        "counter", "US dollars of model calls.", ("workflow", "model"), ()
    ),
}  # fmt: skip


def metrics_enabled() -> bool:
    return bool(getattr(settings, "FLOWPILOT_METRICS", False)) or bool(
        getattr(settings, "FLOWPILOT_METRIC_EXPORTERS", ())
    )


class Metrics:
    """This process's instruments, in prometheus-client and in the OpenTelemetry SDK
    (each when configured); ``add``/``observe`` update both."""

    def __init__(self, *, prometheus: bool, otlp: bool) -> None:
        self.prometheus: dict[str, Any] = {}
        self.otel: dict[str, Any] = {}
        self.registry: Any = None
        self.meter_provider: Any = None
        self.failures = 0
        if prometheus:
            self._prometheus()
        if otlp:
            self._otlp()

    def _prometheus(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        for name, (kind, text, labels, buckets) in INSTRUMENTS.items():
            if kind == "counter":
                self.prometheus[name] = Counter(name, text, labels, registry=self.registry)
            else:
                self.prometheus[name] = Histogram(
                    name, text, labels, buckets=buckets, registry=self.registry
                )

    def _otlp(self) -> None:
        from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader
        from opentelemetry.sdk.resources import Resource

        name = os.environ.get("OTEL_SERVICE_NAME") or "flowpilot"
        reader = PeriodicExportingMetricReader(OTLPMetricExporter())
        self.meter_provider = MeterProvider(
            resource=Resource.create({"service.name": name}), metric_readers=[reader]
        )
        meter = self.meter_provider.get_meter("flowpilot")
        for name, (kind, text, _labels, _buckets) in INSTRUMENTS.items():
            if kind == "counter":
                self.otel[name] = meter.create_counter(name, description=text)
            else:
                self.otel[name] = meter.create_histogram(name, unit="s", description=text)

    def add(self, name: str, labels: Mapping[str, str], amount: float = 1) -> None:
        try:
            if self.prometheus:
                self.prometheus[name].labels(**labels).inc(amount)
            if self.otel:
                self.otel[name].add(amount, dict(labels))
        except Exception as exc:  # noqa: BLE001 - counting never fails a run
            self._failed(exc)

    def observe(self, name: str, labels: Mapping[str, str], value: float) -> None:
        try:
            if self.prometheus:
                self.prometheus[name].labels(**labels).observe(value)
            if self.otel:
                self.otel[name].record(value, dict(labels))
        except Exception as exc:  # noqa: BLE001 - counting never fails a run
            self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        """A count that could not be made (the multiprocess directory gone, a full disk)
        is lost, never the run's step: said once per process, then counted quietly."""
        self.failures += 1
        if self.failures == 1:
            logger.error(
                "metrics: a count was lost and later ones may be (%s: %s)", type(exc).__name__, exc
            )

    # --- what is counted ------------------------------------------------------------

    def try_done(
        self, *, workflow: str, tool: str, status: str, seconds: float, number: int,
        error: Mapping[str, Any] | None,
    ) -> None:  # fmt: skip
        """One try of a step, as its attempt record says."""
        self.add("flowpilot_step_tries", {"workflow": workflow, "tool": tool, "status": status})
        self.observe(
            "flowpilot_step_try_duration_seconds", {"workflow": workflow, "tool": tool}, seconds
        )
        if number > 1:
            self.add("flowpilot_step_retries", {"workflow": workflow, "tool": tool})
        if error and error.get("type") == "rate_limit_wait":
            where = {"tool": tool, "where": "requeued"}
            self.add("flowpilot_rate_limit_waits", where)
            waited = error.get("retry_after")
            if isinstance(waited, int | float):
                self.add("flowpilot_rate_limit_wait_seconds", where, float(waited))

    def tool_call(
        self, *, tool: str, kind: str, request: Mapping[str, Any] | None, error_type: str
    ) -> None:
        """One call of a tool: its outcome, its HTTP status, what it slept for a slot."""
        outcome = error_type or "ok"
        self.add("flowpilot_tool_calls", {"tool": tool, "kind": kind, "outcome": outcome})
        if not request:
            return
        status = request.get("status")
        if isinstance(status, int):
            self.add("flowpilot_http_responses", {"tool": tool, "status": str(status)})
        waited = request.get("rate_limit_wait")
        if isinstance(waited, int | float) and waited > 0:
            where = {"tool": tool, "where": "in_place"}
            self.add("flowpilot_rate_limit_waits", where)
            self.add("flowpilot_rate_limit_wait_seconds", where, float(waited))

    def llm_call(
        self, *, workflow: str, endpoint: str, model: str, prompt_tokens: int,
        completion_tokens: int, cost_pico: int | None,
    ) -> None:  # fmt: skip
        """One answered model call: its tokens and (when its model has a price) cost."""
        self.add(
            "flowpilot_llm_calls", {"workflow": workflow, "endpoint": endpoint, "model": model}
        )
        for kind, count in (("prompt", prompt_tokens), ("completion", completion_tokens)):
            if count:
                labels = {"workflow": workflow, "model": model, "type": kind}
                self.add("flowpilot_llm_tokens", labels, count)
        if cost_pico:
            usd = float(Decimal(cost_pico) / PICO)
            self.add("flowpilot_llm_cost_usd", {"workflow": workflow, "model": model}, usd)

    def run_finished(
        self, *, workflow: str, status: str, trigger: str, seconds: float | None
    ) -> None:
        self.add(
            "flowpilot_runs_finished", {"workflow": workflow, "status": status, "trigger": trigger}
        )
        if seconds is not None:
            labels = {"workflow": workflow, "status": status}
            self.observe("flowpilot_run_duration_seconds", labels, seconds)

    def flush(self, timeout_millis: float = 10_000) -> None:
        """Send what OTLP has not yet (a command about to exit, a test)."""
        if self.meter_provider is not None:
            self.meter_provider.force_flush(timeout_millis)


def process_metrics() -> Metrics | None:
    """This process's metrics, or None when neither Prometheus nor OTLP is configured."""
    if not metrics_enabled():
        return None
    key = (
        os.getpid(),  # a forked worker process makes its own (its own OTLP thread)
        bool(getattr(settings, "FLOWPILOT_METRICS", False)),
        bool(getattr(settings, "FLOWPILOT_METRIC_EXPORTERS", ())),
    )
    with _LOCK:
        found = _PROCESS.get(key)
        if found is None:
            found = _PROCESS[key] = Metrics(prometheus=key[1], otlp=key[2])
        return found


# The process's instruments, made once: prometheus-client refuses a second instrument of
# a name in one registry, and its multiprocess files are per process anyway.
_PROCESS: dict[tuple[int, bool, bool], Metrics] = {}
_LOCK = threading.Lock()


def flush_metrics(timeout_millis: float = 10_000) -> None:
    """Send what this process's OTLP reader buffers (a pool process about to exit)."""
    with _LOCK:
        made = list(_PROCESS.values())
    for metrics in made:
        metrics.flush(timeout_millis)


def forget_process_metrics() -> None:
    """Drop this process's instruments (tests: the next ones read the settings again)."""
    with _LOCK:
        for metrics in _PROCESS.values():
            if metrics.meter_provider is not None:
                metrics.meter_provider.shutdown()
        _PROCESS.clear()
