"""Which trace and metric exporters the standard OpenTelemetry variables ask for.

``OTEL_TRACES_EXPORTER`` lists them (``otlp``, ``console``; ``none``: off); unset, an
OTLP endpoint (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``)
means ``otlp``, and nothing means off. Metrics likewise, with ``OTEL_METRICS_EXPORTER``
(``otlp`` only: Prometheus is served by flowpilot itself, ``FLOWPILOT_METRICS``) and
``OTEL_EXPORTER_OTLP_METRICS_ENDPOINT``. ``OTEL_SDK_DISABLED=true`` turns both off.
An exporter flowpilot does not ship stops the process at start-up.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

TRACE_EXPORTERS = ("otlp", "console")
METRIC_EXPORTERS = ("otlp",)


def read_trace_exporters(env: Any) -> tuple[str, ...]:
    return _exporters(env, "TRACES", TRACE_EXPORTERS)


def read_metric_exporters(env: Any) -> tuple[str, ...]:
    return _exporters(env, "METRICS", METRIC_EXPORTERS)


def _exporters(env: Any, signal: str, shipped: tuple[str, ...]) -> tuple[str, ...]:
    if env.bool("OTEL_SDK_DISABLED", default=False):
        return ()
    variable = f"OTEL_{signal}_EXPORTER"
    named = [name.strip().lower() for name in env.list(variable, default=[])]
    named = [name for name in named if name]
    if not named:
        endpoint = env.str(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", default="") or env.str(
            "OTEL_EXPORTER_OTLP_ENDPOINT", default=""
        )
        return ("otlp",) if endpoint.strip() else ()
    unknown = [name for name in named if name not in (*shipped, "none")]
    if unknown:
        raise ImproperlyConfigured(
            f"{variable}: {', '.join(unknown)} is not an exporter flowpilot ships "
            f"(known: {', '.join(shipped)}, or none)"
        )
    return tuple(dict.fromkeys(name for name in named if name != "none"))
