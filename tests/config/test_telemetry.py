"""config/telemetry.py: which trace exporters the OpenTelemetry variables ask for."""

from __future__ import annotations

import environ
import pytest
from django.core.exceptions import ImproperlyConfigured

from config.telemetry import check_otlp_protocol, read_trace_exporters, read_trace_ratio

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


@pytest.mark.parametrize(
    ("values", "ratio"),
    [
        ({}, 1.0),
        ({"OTEL_TRACES_SAMPLER": "always_off"}, 0.0),
        ({"OTEL_TRACES_SAMPLER": "parentbased_always_on"}, 1.0),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25"}, 0.25),
        ({"OTEL_TRACES_SAMPLER": "parentbased_traceidratio"}, 1.0),
    ],
)
def test_the_sampler_becomes_a_ratio_of_runs(monkeypatch, values, ratio):
    for name in ("OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG"):
        monkeypatch.delenv(name, raising=False)
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    assert read_trace_ratio(environ.Env()) == ratio


@pytest.mark.parametrize(
    ("values", "words"),
    [
        ({"OTEL_TRACES_SAMPLER": "jaeger_remote"}, "jaeger_remote is not a sampler"),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "not a ratio"),
        ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "x"}, "not a ratio"),
    ],
)
def test_a_sampler_flowpilot_cannot_apply_stops_start_up(monkeypatch, values, words):
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(ImproperlyConfigured, match=words):
        read_trace_ratio(environ.Env())


def test_otlp_over_grpc_stops_start_up(monkeypatch):
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with pytest.raises(ImproperlyConfigured, match="speaks OTLP over HTTP"):
        check_otlp_protocol(environ.Env())
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    check_otlp_protocol(environ.Env())
