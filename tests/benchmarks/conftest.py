"""What the PostgreSQL benchmarks' smoke runs share: the test server's URL and a run of
a benchmark script in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def postgres_server_url(db: None) -> str:
    """The PostgreSQL server of this pass (its ``postgres`` database: a benchmark makes
    and drops its own); skips on the other databases' pass."""
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("measures PostgreSQL: runs on the PostgreSQL pass")
    settings = connection.settings_dict
    return (
        f"postgres://{settings['USER'] or 'postgres'}@{settings['HOST'] or '127.0.0.1'}"
        f":{settings['PORT'] or 5432}/postgres"
    )


@pytest.fixture
def run_benchmark() -> Callable[..., str]:
    """``run_benchmark("pg_floor.py", "--tries", "3")``: its standard output, once it
    exited 0."""

    def run(script: str, *args: str) -> str:
        done = subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / script), *args],
            cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    return run
