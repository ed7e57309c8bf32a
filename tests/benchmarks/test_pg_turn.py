"""``benchmarks/pg_turn.py`` prints where a chain step's time goes on PostgreSQL: a smoke
run and the table's arithmetic, never a timing."""

from __future__ import annotations

import pytest

from benchmarks.pg_turn import CONFIGS, Config, Figures, table


def test_the_table_derives_the_flush_what_preparing_saves_and_the_rest():
    turns = {
        Config(True, True): 0.5,
        Config(True, False): 0.2,
        Config(False, True): 1.1,
        Config(False, False): 0.8,
    }
    text = table([Figures(config, turns[config], 3.0, 1.0) for config in CONFIGS])
    assert "| prepared, flushed | 0.500 ms | 3.000 ms | 1.000 ms | 1.500 ms |" in text
    assert "| parsed every time, not flushed | 0.800 ms | 3.000 ms | 1.000 ms | 1.200 ms |" in text
    assert "the flush in a turn (prepared: flushed - not flushed): 0.300 ms" in text
    assert "what preparing saves a turn (flushed: parsed every time - prepared): 0.600 ms" in text


@pytest.mark.postgres
def test_one_short_run_on_the_test_server_prints_the_four_configurations(
    postgres_server_url, run_benchmark
):
    url = postgres_server_url
    out = run_benchmark("pg_turn.py", "--database-url", url, "--steps", "3", "--repeat", "1")
    rows = [line for line in out.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 4  # the header and the four configurations
    assert "the flush in a turn" in out
