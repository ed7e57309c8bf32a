"""The whole-suite runner, ``python -m tests`` (tests/__main__.py)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from coverage import CoverageData

from tests.__main__ import (
    POSTGRES,
    SQLITE,
    Pass,
    _coverage_args,
    _workers,
    combine_coverage,
    plan,
    run,
)
from tests.celery_support import worker_redis_url
from tests.conftest import REPO_ROOT

# A part of the suite that imports little app code: far below the coverage floor.
SMALL_PART = "tests/test_flowpilot.py"
ENV = {"PATH": "/usr/bin", "FLOWPILOT_TEST_POSTGRES_URL": "postgres://db.example/suite"}


def _run_tests(tmp_path, *args):
    """``python -m tests`` on SQLite only (PostgreSQL unreachable, CI unset), in one
    process (``-n 0``): two pytest-xdist workers would each start Django for one file."""
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "DATABASE_URL"}}
    env["FLOWPILOT_TEST_POSTGRES_URL"] = "postgres://postgres@127.0.0.1:1/none"
    env["COVERAGE_FILE"] = str(tmp_path / ".coverage")  # never the outer run's data
    return subprocess.run(
        [
            *(sys.executable, "-m", "tests", SMALL_PART),
            *("-q", "-n", "0", "-p", "no:cacheprovider", *args),
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_coverage_below_the_floor_fails_the_run(tmp_path):
    result = _run_tests(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "Coverage failure: total of" in result.stdout
    assert "is less than fail-under=95" in result.stdout
    assert "PostgreSQL pass skipped" in result.stdout
    assert (tmp_path / ".coverage").exists()  # the combined data, where COVERAGE_FILE says


@pytest.mark.slow
def test_no_cov_turns_the_floor_off(tmp_path):
    result = _run_tests(tmp_path, "--no-cov")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Coverage failure" not in result.stdout
    assert f"{SQLITE}    passed" in result.stdout


# --- which passes run, with what ------------------------------------------------------


def test_both_passes_run_on_workers_of_their_own_with_coverage():
    sqlite, pg = plan(["tests/runs", "-q"], {**ENV, "DATABASE_URL": "x"}, pg_up=True)

    assert (sqlite.label, pg.label) == (SQLITE, POSTGRES)
    assert sqlite.args == pg.args == ["-n", "2", "tests/runs", "-q"]
    assert "DATABASE_URL" not in sqlite.env
    assert pg.env["DATABASE_URL"] == "postgres://db.example/suite"
    # Schemathesis's command line runs once, on the PostgreSQL pass.
    assert sqlite.env["FLOWPILOT_TEST_PASS"] == "first"
    # The tests that use no database run once, on the SQLite pass.
    assert pg.env["FLOWPILOT_TEST_PASS"] == "database"
    # Redis dbs 12-13 for the SQLite pass's workers, 14-15 for PostgreSQL's.
    assert sqlite.env["FLOWPILOT_TEST_REDIS_URL"] == "redis://127.0.0.1:6379/12"
    assert pg.env["FLOWPILOT_TEST_REDIS_URL"] == "redis://127.0.0.1:6379/14"
    assert sqlite.coverage_file != pg.coverage_file
    assert None not in (sqlite.coverage_file, pg.coverage_file)


@pytest.mark.parametrize(
    ("version", "environ", "core"),
    [
        ((3, 11), {}, None),  # no sys.monitoring: coverage's own trace function
        ((3, 12), {}, "sysmon"),
        ((3, 13), {}, "sysmon"),
        ((3, 13), {"COVERAGE_CORE": "ctrace"}, None),  # the caller's choice is kept
    ],
)
def test_coverage_listens_through_sys_monitoring_where_python_has_it(version, environ, core):
    args, env = _coverage_args(Path("x/.coverage"), environ, version)

    assert args == ["--cov", "--cov-report=", "--cov-fail-under=0"]
    assert env.get("COVERAGE_CORE") == core
    assert env["COVERAGE_FILE"] == "x/.coverage"


def test_the_pass_after_the_sqlite_one_counts_its_redis_dbs_from_the_given_url():
    environ = {**ENV, "FLOWPILOT_TEST_REDIS_URL": "redis://:pw@10.0.0.5:6380/3"}
    sqlite, pg = plan(["-n", "3"], environ, pg_up=True)

    assert sqlite.args == pg.args == ["-n", "3"]
    assert sqlite.env["FLOWPILOT_TEST_REDIS_URL"] == "redis://:pw@10.0.0.5:6380/3"
    assert pg.env["FLOWPILOT_TEST_REDIS_URL"] == "redis://:pw@10.0.0.5:6380/6"
    # One process per pass: the PostgreSQL pass still has a db of its own.
    for serial_args in (["-p", "no:xdist"], ["-n", "0"]):
        _, serial = plan(serial_args, environ, pg_up=True)
        assert serial.args == serial_args
        assert serial.env["FLOWPILOT_TEST_REDIS_URL"] == "redis://:pw@10.0.0.5:6380/4"


def test_more_workers_than_redis_dbs_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match=r"gw5 would use Redis db 17 .*run fewer workers"):
        plan(["-n", "3"], ENV, pg_up=True)
    # Alone, the SQLite pass has the dbs it needs.
    assert len(plan(["-n", "3"], ENV, pg_up=False)) == 1


def test_without_postgresql_the_sqlite_pass_runs_alone_with_every_test():
    (sqlite,) = plan([], ENV, pg_up=False)
    assert "FLOWPILOT_TEST_PASS" not in sqlite.env
    assert sqlite.coverage_file is not None


def test_no_cov_records_nothing():
    passes = plan(["--no-cov", "tests/tools"], ENV, pg_up=True)
    assert [p.coverage_file for p in passes] == [None, None]
    assert all(p.args == ["-n", "2", "tests/tools"] for p in passes)


def test_fast_is_the_sqlite_pass_without_coverage_or_slow_tests():
    (fast,) = plan(["--fast", "tests/runs"], {**ENV, "FLOWPILOT_TEST_PASS": "first"}, pg_up=True)
    assert fast.label == SQLITE
    assert fast.args == ["-n", "2", "-m", "not slow", "tests/runs"]
    assert fast.coverage_file is None
    assert "FLOWPILOT_TEST_PASS" not in fast.env  # every selected test runs


@pytest.mark.parametrize(
    ("args", "workers"),
    [
        ([], None),
        (["-n", "3"], 3),
        (["-n3"], 3),
        (["--numprocesses", "4"], 4),
        (["--numprocesses=1"], 1),
        (["-n", "auto"], os.cpu_count()),
        (["-q", "--no-header"], None),
    ],
)
def test_the_worker_count_the_arguments_ask_for(args, workers):
    assert _workers(args) == workers


@pytest.mark.parametrize(
    ("worker", "url"),
    [
        ("", "redis://127.0.0.1:6379/12"),
        ("gw0", "redis://127.0.0.1:6379/12"),
        ("gw3", "redis://127.0.0.1:6379/15"),
    ],
)
def test_each_xdist_worker_has_a_redis_db_of_its_own(worker, url):
    assert worker_redis_url("redis://127.0.0.1:6379/12", worker) == url


def test_a_worker_past_the_last_redis_db_is_refused_with_the_variable_named():
    with pytest.raises(ValueError, match=r"gw4 would use Redis db 16 .*FLOWPILOT_TEST_REDIS_URL"):
        worker_redis_url("redis://127.0.0.1:6379/12", "gw4")


# --- running passes side by side, judging their coverage together ---------------------


def _pass(label: str, test_dir: Path, body: str) -> Pass:
    test_dir.mkdir()
    (test_dir / "test_it.py").write_text(f"def test_it():\n    {body}\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO", "COV_CORE"))}
    args = [str(test_dir), "-q", "-p", "no:cacheprovider", "-p", "no:django", "-p", "no:xdist"]
    return Pass(label, env, [*args, "--rootdir", str(test_dir)])


def test_passes_run_side_by_side_and_one_failing_fails_the_run(tmp_path, capsys):
    passes = [
        _pass("Passing", tmp_path / "ok", "assert 'ok'"),
        _pass("Failing", tmp_path / "bad", "assert 1 == 2, 'the failing pass'"),
    ]

    status = run(passes, tmp_path / ".coverage")

    out = capsys.readouterr().out
    assert status == 1
    # Each pass's output in one piece, under its label.
    failing = out.index("=== Failing pass: output ===")
    assert "the failing pass" in out[failing:]
    assert "the failing pass" not in out[out.index("=== Passing pass: output ===") :][:200]
    summary = out[out.index("=== flowpilot tests: summary ===") :]
    assert re.search(r"^Passing +passed ", summary, re.M)
    assert re.search(r"^Failing +FAILED \(pytest exit 1\) ", summary, re.M)
    assert "coverage" not in summary  # nothing measured


def _record(data_file: Path, source: Path, lines: list[int]) -> Path:
    data_file.parent.mkdir()
    data = CoverageData(basename=str(data_file))
    data.add_lines({str(source): lines})
    data.write()
    return data_file


@pytest.fixture
def half_covered(tmp_path, monkeypatch):
    """A package of four statements; the floor at 75 %; each pass ran half of it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text(
        '[tool.coverage.run]\nsource = ["app"]\n[tool.coverage.report]\nfail_under = 75\n'
    )
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "__init__.py").write_text("")
    module = tmp_path / "app" / "calc.py"
    module.write_text("a = 1\nb = 2\nc = 3\nd = 4\n")
    first = _record(tmp_path / "one" / ".coverage", module, [1, 2])
    second = _record(tmp_path / "two" / ".coverage", module, [3, 4])
    return first, second


def test_the_floor_judges_the_passes_combined(half_covered, tmp_path, capfd):
    first, second = half_covered

    assert combine_coverage([first, second], tmp_path / ".coverage") == 0

    assert "TOTAL       4      0   100%" in capfd.readouterr().out
    assert (tmp_path / ".coverage").exists()


def test_one_pass_alone_below_the_floor_fails(half_covered, tmp_path, capfd):
    first, _ = half_covered

    assert combine_coverage([first], tmp_path / ".coverage") == 2

    assert "Coverage failure: total of 50 is less than fail-under=75" in capfd.readouterr().out


def test_no_recorded_data_fails(tmp_path, capsys):
    assert combine_coverage([tmp_path / "missing" / ".coverage"], tmp_path / ".coverage") == 1
    assert "no pass recorded any data" in capsys.readouterr().out


def test_fast_leaves_out_worker_processes_browsers_and_the_documented_commands():
    parts = ["tests/runs/test_celery_workers.py", "tests/browser/test_run_page.py"]
    parts += ["tests/test_doc_commands.py", "tests/tools/breaker/test_shared.py"]
    select = ["--co", "-q", "-m", "not slow", "-p", "no:cacheprovider", "-p", "no:xdist"]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *select, *parts],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    kept = {line.split("::")[1].split("[")[0] for line in done.stdout.splitlines() if "::" in line}
    # What stays: the checks of the documented commands' list, which start nothing.
    assert kept == {
        "test_every_skipped_or_prepared_command_is_still_shown",
        "test_the_commands_are_found_in_code_blocks_as_written",
    }


@pytest.mark.parametrize("told", ["database", None])
def test_the_database_pass_keeps_only_the_tests_that_use_a_database(told):
    env = {k: v for k, v in os.environ.items() if k not in {"FLOWPILOT_TEST_PASS", "DATABASE_URL"}}
    if told:
        env["FLOWPILOT_TEST_PASS"] = told
    files = ["tests/tools/test_sizes.py", "tests/runs/test_services.py"]
    listed = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stdout + listed.stderr
    ids = [line for line in listed.stdout.splitlines() if "::" in line]
    assert any(i.startswith("tests/runs/test_services.py::") for i in ids)  # django_db tests
    sizes = [i for i in ids if i.startswith("tests/tools/test_sizes.py::")]  # no database
    if told:
        assert sizes == []
        assert re.search(r"\(\d+ deselected\)", listed.stdout)
    else:
        assert len(sizes) > 10
