"""``benchmarks/pg_floor.py`` prints what a durable write costs: a smoke run, never a timing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.pg_floor import FLUSH, NO_FLUSH, Row, table

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_shows_each_row_and_the_flush_as_the_difference():
    rows = [
        Row("SELECT 1 (a round trip)", 0.05, 0.08),
        Row(NO_FLUSH, 0.06, 0.10),
        Row(FLUSH, 0.20, 1.35),
    ]
    text = table(rows)
    assert f"| {FLUSH} | 0.200 ms | 1.350 ms |" in text
    assert text.endswith("the flush (median with it - median without): 1.250 ms")


@pytest.mark.postgres
@pytest.mark.django_db
def test_one_short_run_on_the_test_server_prints_every_row():
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("measures PostgreSQL: runs on the PostgreSQL pass")
    settings = connection.settings_dict
    url = (
        f"postgres://{settings['USER'] or 'postgres'}@{settings['HOST'] or '127.0.0.1'}"
        f":{settings['PORT'] or 5432}/postgres"
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "pg_floor.py"), "--database-url", url,
         "--tries", "3"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 4  # the header and four measurements
    assert "the flush (median with it - median without):" in done.stdout
