"""tools/logformat.py: one JSON object per log line, with the ids of what it is about.

The formatter is tested on a real logger writing to a string; the end-to-end test runs
``manage.py runflow --log-level debug`` with ``FLOWPILOT_LOG_FORMAT=json`` in a
subprocess, on a fresh SQLite database, against the recording fake of the public APIs.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import EXAMPLE_TOOLS_DIR, EXAMPLES_DIR, FAKE_API_ENV, REPO_ROOT
from tests.startup import start_deadline
from tools.logcontext import log_fields
from tools.logformat import TEXT_FORMAT, JsonFormatter, formatter_for

TRY = {"run_id": 7, "trace_id": "0" * 31 + "7", "step_id": "fetch", "attempt": 2, "item": 3}


@pytest.fixture
def logged() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    """A logger of its own writing JSON lines to a string."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("flowpilot.tests.logformat")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    yield logger, out
    logger.removeHandler(handler)


def lines(out: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().split("\n") if line]


def test_a_line_holds_the_keys_in_order(logged):
    logger, out = logged

    logger.warning("run %s: %s", 7, "slow")

    (line,) = lines(out)
    assert list(line) == ["time", "level", "logger", "message", "process", "thread"]
    assert line["level"] == "WARNING"
    assert line["logger"] == "flowpilot.tests.logformat"
    assert line["message"] == "run 7: slow"
    assert line["process"] == "MainProcess"
    assert line["thread"] == threading.current_thread().name
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", line["time"])


def test_the_time_is_utc_with_milliseconds():
    record = logging.makeLogRecord({"msg": "x", "created": 1_795_000_000.0, "msecs": 123.9})

    assert json.loads(JsonFormatter().format(record))["time"] == "2026-11-18T11:06:40.123Z"


def test_the_ids_of_the_block_it_was_logged_in(logged):
    logger, out = logged

    with log_fields(**TRY):
        logger.info("calling")
    logger.info("after the try")

    inside, after = lines(out)
    assert list(inside)[4:9] == ["run_id", "step_id", "attempt", "item", "trace_id"]
    assert {name: inside[name] for name in TRY} == TRY
    assert not set(TRY) & set(after)


def test_ids_passed_with_the_call_win_over_the_block(logged):
    logger, out = logged

    with log_fields(run_id=7, trace_id="ab" * 16):
        logger.info("a step's line", extra={"step_id": "langs", "run_id": 8})
        logger.info("no step", extra={"step_id": None})

    explicit, unset = lines(out)
    assert (explicit["run_id"], explicit["step_id"], explicit["trace_id"]) == (
        8,
        "langs",
        "ab" * 16,
    )
    assert unset["run_id"] == 7
    assert "step_id" not in unset


def test_an_exception_is_its_traceback(logged):
    logger, out = logged

    try:
        raise ValueError("bad value")
    except ValueError:
        logger.exception("it failed")

    (line,) = lines(out)
    assert line["message"] == "it failed"
    assert line["exception"].startswith("Traceback (most recent call last):")
    assert line["exception"].endswith("ValueError: bad value")
    assert list(line)[-3:] == ["exception", "process", "thread"]


def test_a_message_on_several_lines_is_one_line(logged):
    logger, out = logged

    logger.info("first\nsecond\r\nthird\x85fourth\u2028fifth\u2029sixth")

    text = out.getvalue()
    assert text.count("\n") == 1
    assert len(text.splitlines()) == 1  # NEL and the Unicode separators are escaped too
    assert lines(out)[0]["message"] == "first\nsecond\r\nthird\x85fourth\u2028fifth\u2029sixth"


def test_values_that_are_not_json_are_written_as_text(logged):
    logger, out = logged

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

    with log_fields(item=Unprintable()):
        logger.info("odd ids", extra={"run_id": {"a": {1, 2}}, "attempt": float("nan")})
    logger.info(Path("/tmp/x"))  # a message that is not a string

    odd, path = lines(out)
    assert odd["run_id"] == str({"a": {1, 2}})
    assert odd["attempt"] == "nan"
    assert odd["item"] == "<Unprintable that cannot be shown>"
    assert path["message"] == "/tmp/x"


def test_non_ascii_text_is_kept_as_is(logged):
    logger, out = logged

    logger.info("météo à Zürich: ☀ 🌡", extra={"step_id": "wetter_über"})

    assert "météo à Zürich: ☀ 🌡" in out.getvalue()
    assert "wetter_über" in out.getvalue()
    assert lines(out)[0]["message"] == "météo à Zürich: ☀ 🌡"


def test_a_lone_surrogate_is_escaped():
    record = logging.makeLogRecord({"msg": "bytes \udcff read"})

    text = JsonFormatter().format(record)

    text.encode("utf-8")  # would raise on a lone surrogate
    assert json.loads(text)["message"] == "bytes \udcff read"


def test_formatter_for_each_format():
    assert isinstance(formatter_for("json"), JsonFormatter)
    text = formatter_for("text")
    assert type(text) is logging.Formatter
    assert text._fmt == TEXT_FORMAT


# --- end to end: runflow in JSON ------------------------------------------------------

# The commands run on a fresh SQLite database of their own whatever the pass's database,
# so they run once: in the SQLite pass of ``python -m tests``.
ONCE = pytest.mark.skipif(
    os.environ.get("DATABASE_URL", "").startswith("postgres"),
    reason="runs on a SQLite database of its own: once, in the SQLite pass",
)


def manage(args: list[str], *, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "manage.py"), *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=start_deadline(),
        check=False,
    )


def command_env(tmp_path: Path, **more: str) -> dict[str, str]:
    """The environment of a command on its own SQLite database, settings at defaults."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("FLOWPILOT_", "DATABASE_", "CELERY_", "OPENAI_", "OTEL_"))
        and key not in {"LOG_LEVEL"}
    }
    env.update(
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        FLOWPILOT_OUTPUT_DIR=str(tmp_path / "output"),
        DJANGO_SETTINGS_MODULE="config.settings",
        **more,
    )
    return env


@ONCE
def test_runflow_in_json_writes_every_line_as_json_with_the_run_and_step_ids(tmp_path):
    from tests.fakes import FakeAPI, install

    fake = FakeAPI().start()
    install(fake)
    try:
        env = command_env(tmp_path, FLOWPILOT_LOG_FORMAT="json")
        env.update({name: fake.url + path for name, path in FAKE_API_ENV.items()})
        migrated = manage(["migrate", "-v0"], env=env)
        assert migrated.returncode == 0, migrated.stderr
        assert migrated.stderr == ""
        done = manage(
            [
                "runflow", str(EXAMPLES_DIR / "geo_weather.yaml"), "--tools",
                str(EXAMPLE_TOOLS_DIR), "--input", "ip=8.8.8.8", "--log-level", "debug",
            ],
            env=env,
        )  # fmt: skip
    finally:
        fake.stop()
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(fake.requests()) == 3

    run_id = int(re.search(r"^run (\d+) succeeded", done.stdout, re.MULTILINE).group(1))
    records = []
    for text in done.stderr.splitlines():
        try:
            records.append(json.loads(text))
        except ValueError:
            pytest.fail(f"a line of stderr is not JSON: {text!r}")
    assert records, "no log line at debug"

    steps = [r for r in records if r["logger"].startswith("flowpilot.engine")]
    assert {r.get("step_id") for r in steps} == {"locate", "weather", "country"}
    trace_id = steps[0]["trace_id"]
    assert re.fullmatch("[0-9a-f]{32}", trace_id)
    for record in steps:
        assert (record["run_id"], record["trace_id"]) == (run_id, trace_id), record
    tool_lines = [r for r in steps if r["logger"] == "flowpilot.engine.tool"]
    assert len(tool_lines) == 3
    assert all(r["attempt"] == 1 for r in tool_lines)
    assert {r["thread"] for r in tool_lines} > {"MainThread"}  # two ran on the pool
    assert any(r["message"] == f"run {run_id}: step locate started" for r in steps)

    shown = manage(["showrun", str(run_id), "--json"], env=command_env(tmp_path))
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["uuid"].replace("-", "") == trace_id
