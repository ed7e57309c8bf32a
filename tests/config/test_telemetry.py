"""config/telemetry.py: which trace exporters the OpenTelemetry variables ask for."""

from __future__ import annotations

import environ
import pytest
from django.core.exceptions import ImproperlyConfigured

from config.telemetry import read_trace_exporters

VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


@pytest.mark.parametrize(
    ("values", "exporters"),
    [
        ({}, ()),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, ("otlp",)),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c:4318/v1/traces"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        ({"OTEL_TRACES_EXPORTER": "otlp, console,otlp"}, ("otlp", "console")),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c"}, ()),
        ({"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, ()),
    ],
)
def test_exporters_from_the_standard_variables(monkeypatch, values, exporters):
    for name in VARIABLES:
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    assert read_trace_exporters(environ.Env()) == exporters


def test_an_exporter_not_shipped_stops_start_up(monkeypatch):
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with pytest.raises(ImproperlyConfigured, match="zipkin is not an exporter flowpilot ships"):
        read_trace_exporters(environ.Env())
