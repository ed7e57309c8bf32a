"""The whole-suite runner, ``python -m tests`` (tests/__main__.py)."""

import os
import subprocess
import sys

import pytest

from tests.__main__ import _coverage_args
from tests.conftest import REPO_ROOT

# A part of the suite that imports little app code: far below the coverage floor.
SMALL_PART = "tests/test_flowpilot.py"


def _run_tests(tmp_path, *args):
    """``python -m tests`` on SQLite only (PostgreSQL unreachable, CI unset)."""
    env = {k: v for k, v in os.environ.items() if k not in {"CI", "DATABASE_URL"}}
    env["FLOWPILOT_TEST_POSTGRES_URL"] = "postgres://postgres@127.0.0.1:1/none"
    env["COVERAGE_FILE"] = str(tmp_path / ".coverage")  # never the outer run's data
    return subprocess.run(
        [sys.executable, "-m", "tests", SMALL_PART, "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_coverage_below_the_floor_fails_the_run(tmp_path):
    result = _run_tests(tmp_path)
    assert result.returncode != 0, result.stdout
    assert "Coverage failure: total of" in result.stdout
    assert "is less than fail-under=95" in result.stdout
    assert "PostgreSQL pass skipped" in result.stdout


def test_no_cov_turns_the_floor_off(tmp_path):
    result = _run_tests(tmp_path, "--no-cov")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Coverage failure" not in result.stdout


@pytest.mark.parametrize(
    ("final", "enforces"), [(True, True), (False, False)], ids=["last-pass", "first-of-two"]
)
def test_only_the_last_pass_enforces_the_floor(final, enforces):
    args = _coverage_args(final=final)
    assert "--cov" in args
    assert ("--cov-fail-under=0" not in args) is enforces
