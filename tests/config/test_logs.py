"""config/logs.py: which format the logs are written in (FLOWPILOT_LOG_FORMAT)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import environ
import pytest
from django.core.exceptions import ImproperlyConfigured

from config.logs import read_log_format
from tests.conftest import REPO_ROOT
from tests.startup import start_deadline


@pytest.mark.parametrize(
    ("value", "log_format"),
    [(None, "text"), ("", "text"), ("text", "text"), ("json", "json"), (" JSON ", "json")],
)
def test_the_format_from_the_variable(monkeypatch, value, log_format):
    monkeypatch.delenv("FLOWPILOT_LOG_FORMAT", raising=False)
    if value is not None:
        monkeypatch.setenv("FLOWPILOT_LOG_FORMAT", value)
    assert read_log_format(environ.Env()) == log_format


def test_another_format_is_refused_naming_the_variable_and_the_formats(monkeypatch):
    monkeypatch.setenv("FLOWPILOT_LOG_FORMAT", "xml")
    with pytest.raises(ImproperlyConfigured) as refused:
        read_log_format(environ.Env())
    assert str(refused.value) == (
        "FLOWPILOT_LOG_FORMAT: 'xml' is not a log format flowpilot writes (known: text, json)"
    )


def django_setup(log_format: str | None, then: str = "") -> subprocess.CompletedProcess:
    """``django.setup()`` in a new process with ``FLOWPILOT_LOG_FORMAT=log_format``, then
    the code ``then``."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings"}
    env.pop("FLOWPILOT_LOG_FORMAT", None)
    if log_format is not None:
        env["FLOWPILOT_LOG_FORMAT"] = log_format
    return subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {then}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=start_deadline(),
        check=False,
    )


def test_another_format_stops_start_up():
    done = django_setup("xml")

    assert done.returncode != 0
    assert "ImproperlyConfigured: FLOWPILOT_LOG_FORMAT: 'xml' is not a log format" in done.stderr
    assert "(known: text, json)" in done.stderr


@pytest.mark.parametrize(
    ("log_format", "formatter"), [(None, "Formatter"), ("json", "JsonFormatter")]
)
def test_every_process_logs_to_stderr_in_the_chosen_format(log_format, formatter):
    shown = "import logging; (h,) = logging.getLogger().handlers; print(type(h.formatter).__name__)"
    logged = "logging.getLogger('flowpilot.runs').warning('run %s: ü\\nü', 7, extra={'run_id': 7})"

    done = django_setup(log_format, f"{shown}; {logged}")

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == formatter
    if log_format == "json":
        line = json.loads(done.stderr)
        assert (line["message"], line["run_id"], line["level"]) == ("run 7: ü\nü", 7, "WARNING")
    else:
        assert done.stderr.endswith(" WARNING flowpilot.runs: run 7: ü\nü\n")
