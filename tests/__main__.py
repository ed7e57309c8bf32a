"""The whole test suite: ``python -m tests [pytest args…]``.

Runs pytest on the embedded default (SQLite), then again on PostgreSQL. The
PostgreSQL URL is ``FLOWPILOT_TEST_POSTGRES_URL`` (default: the local server,
user ``postgres``). Under ``CI=true`` an unreachable PostgreSQL fails the run;
elsewhere that pass is skipped with a note saying why.

Coverage is on unless ``--no-cov`` is given, and enforced: the last pass's report
(SQLite and PostgreSQL combined, or SQLite alone when the PostgreSQL pass is
skipped) fails the run below ``fail_under`` of ``[tool.coverage.report]`` in
pyproject.toml. Pass ``--no-cov`` when running part of the suite.

A few costly checks that do not depend on the pass's database run once: when a
PostgreSQL pass follows, the SQLite pass is told so (``FLOWPILOT_TEST_PASS=first``)
and the Schemathesis command line skips there, running on the PostgreSQL pass.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from urllib.parse import urlparse

DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/flowpilot"


def _reachable(url: str) -> bool:
    parsed = urlparse(url)
    try:
        with socket.create_connection((parsed.hostname or "127.0.0.1", parsed.port or 5432), 3):
            return True
    except OSError:
        return False


def _coverage_args(*, final: bool) -> list[str]:
    """pytest-cov flags: the last pass reports and enforces the floor; a first one records."""
    if final:
        return ["--cov", "--cov-report=term:skip-covered"]
    return ["--cov", "--cov-report=", "--cov-fail-under=0"]


def _pytest(args: list[str], env: dict[str, str], label: str) -> int:
    print(f"\n=== flowpilot tests on {label} ===", flush=True)
    return subprocess.call([sys.executable, "-m", "pytest", *args], env=env)


def main(argv: list[str]) -> int:
    ci = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
    base_env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    cov = "--no-cov" not in argv
    args = [a for a in argv if a != "--no-cov"]
    pg_url = os.environ.get("FLOWPILOT_TEST_POSTGRES_URL", DEFAULT_PG)
    pg_runs = _reachable(pg_url)
    # The coverage floor (fail_under in pyproject) judges the final, combined report:
    # the SQLite pass defers to the PostgreSQL pass when one follows.
    cov_sqlite = _coverage_args(final=not pg_runs) if cov else []
    # A few costly tests that check no database behaviour run once, on the last pass.
    sqlite_env = {**base_env, "FLOWPILOT_TEST_PASS": "first"} if pg_runs else base_env
    status = _pytest([*cov_sqlite, *args], sqlite_env, "SQLite (embedded default)")
    if pg_runs:
        pg_env = {**base_env, "DATABASE_URL": pg_url}
        cov_pg = [*_coverage_args(final=True), "--cov-append"] if cov else []
        status = _pytest([*cov_pg, *args], pg_env, "PostgreSQL") or status
    elif ci:
        print(f"PostgreSQL at {pg_url} is unreachable, and CI=true requires it", file=sys.stderr)
        status = status or 1
    else:
        print(f"note: PostgreSQL pass skipped: {pg_url} is unreachable (required when CI=true)")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
