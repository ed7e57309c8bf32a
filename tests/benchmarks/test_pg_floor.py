"""``benchmarks/pg_floor.py`` prints what a durable write costs: a smoke run, never a timing."""

from __future__ import annotations

import pytest

from benchmarks.pg_floor import FLUSH, NO_FLUSH, Row, table


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
def test_one_short_run_on_the_test_server_prints_every_row(postgres_server_url, run_benchmark):
    out = run_benchmark("pg_floor.py", "--database-url", postgres_server_url, "--tries", "3")
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 4  # the header and four measurements
    assert "the flush (median with it - median without):" in out
