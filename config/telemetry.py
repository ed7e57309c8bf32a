"""Which trace exporters the standard OpenTelemetry variables ask for.

``OTEL_TRACES_EXPORTER`` lists them (``otlp``, ``console``; ``none``: off); unset, an
OTLP endpoint (``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``)
means ``otlp``, and nothing means off. ``OTEL_SDK_DISABLED=true`` turns everything off.
An exporter flowpilot does not ship stops the process at start-up.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ImproperlyConfigured

TRACE_EXPORTERS = ("otlp", "console")


def read_trace_exporters(env: Any) -> tuple[str, ...]:
    if env.bool("OTEL_SDK_DISABLED", default=False):
        return ()
    named = [name.strip().lower() for name in env.list("OTEL_TRACES_EXPORTER", default=[])]
    named = [name for name in named if name]
    if not named:
        endpoint = env.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", default="") or env.str(
            "OTEL_EXPORTER_OTLP_ENDPOINT", default=""
        )
        return ("otlp",) if endpoint.strip() else ()
    unknown = [name for name in named if name not in (*TRACE_EXPORTERS, "none")]
    if unknown:
        raise ImproperlyConfigured(
            f"OTEL_TRACES_EXPORTER: {', '.join(unknown)} is not an exporter flowpilot ships "
            f"(known: {', '.join(TRACE_EXPORTERS)}, or none)"
        )
    return tuple(dict.fromkeys(name for name in named if name != "none"))
