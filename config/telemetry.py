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


RATIO_SAMPLERS = ("traceidratio", "parentbased_traceidratio")
ALL_SAMPLERS = ("always_on", "parentbased_always_on", "always_off", "parentbased_always_off")


def read_trace_ratio(env: Any) -> float:
    """The share of runs traced, from ``OTEL_TRACES_SAMPLER`` (and ``_ARG`` for a ratio).
    A run is always a root, so a ``parentbased_`` sampler decides as its root sampler."""
    name = env.str("OTEL_TRACES_SAMPLER", default="").strip().lower()
    if not name or name in ALL_SAMPLERS[:2]:
        return 1.0
    if name in ALL_SAMPLERS[2:]:
        return 0.0
    if name not in RATIO_SAMPLERS:
        known = ", ".join((*ALL_SAMPLERS, *RATIO_SAMPLERS))
        raise ImproperlyConfigured(
            f"OTEL_TRACES_SAMPLER: {name} is not a sampler flowpilot applies (known: {known})"
        )
    text = env.str("OTEL_TRACES_SAMPLER_ARG", default="1.0")
    try:
        ratio = float(text)
    except ValueError:
        ratio = -1.0
    if not 0 <= ratio <= 1:
        raise ImproperlyConfigured(f"OTEL_TRACES_SAMPLER_ARG: {text!r} is not a ratio from 0 to 1")
    return ratio


def check_otlp_protocol(env: Any) -> None:
    """flowpilot sends OTLP over HTTP (protobuf); another protocol stops start-up rather
    than being ignored."""
    for variable in (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
        "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
    ):
        value = env.str(variable, default="").strip()
        if value and value != "http/protobuf":
            raise ImproperlyConfigured(
                f"{variable}: {value} is not sent by flowpilot, which speaks OTLP over HTTP "
                "(http/protobuf): point it at the collector's HTTP port (4318)"
            )
