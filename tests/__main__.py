"""The whole test suite: ``python -m tests [pytest args…]``.

Runs pytest on the embedded default (SQLite), then again on PostgreSQL. The
PostgreSQL URL is ``FLOWPILOT_TEST_POSTGRES_URL`` (default: the local server,
user ``postgres``). Under ``CI=true`` an unreachable PostgreSQL fails the run;
elsewhere that pass is skipped with a note saying why.
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


def _pytest(args: list[str], env: dict[str, str], label: str) -> int:
    print(f"\n=== flowpilot tests on {label} ===", flush=True)
    return subprocess.call([sys.executable, "-m", "pytest", *args], env=env)


def main(argv: list[str]) -> int:
    ci = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
    base_env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    cov = ["--cov", "--cov-report="] if "--no-cov" not in argv else []
    args = [a for a in argv if a != "--no-cov"]
    status = _pytest([*cov, *args], base_env, "SQLite (embedded default)")
    pg_url = os.environ.get("FLOWPILOT_TEST_POSTGRES_URL", DEFAULT_PG)
    if _reachable(pg_url):
        pg_env = {**base_env, "DATABASE_URL": pg_url}
        cov_pg = ["--cov", "--cov-append", "--cov-report=term:skip-covered"] if cov else []
        status = _pytest([*cov_pg, *args], pg_env, "PostgreSQL") or status
    elif ci:
        print(f"PostgreSQL at {pg_url} is unreachable, and CI=true requires it", file=sys.stderr)
        status = status or 1
    else:
        print(f"note: PostgreSQL pass skipped: {pg_url} is unreachable (required when CI=true)")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
