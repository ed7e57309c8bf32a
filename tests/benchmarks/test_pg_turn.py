"""``benchmarks/pg_turn.py`` prints where a chain step's time goes on PostgreSQL: a smoke
run and the table's arithmetic, never a timing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.pg_turn import CONFIGS, Config, Figures, table

ROOT = Path(__file__).resolve().parents[2]


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
@pytest.mark.django_db
def test_one_short_run_on_the_test_server_prints_the_four_configurations():
    from django.db import connection

    if connection.vendor != "postgresql":
        pytest.skip("measures PostgreSQL: runs on the PostgreSQL pass")
    settings = connection.settings_dict
    url = (
        f"postgres://{settings['USER'] or 'postgres'}@{settings['HOST'] or '127.0.0.1'}"
        f":{settings['PORT'] or 5432}/postgres"
    )
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "pg_turn.py"), "--database-url", url,
         "--steps", "3", "--repeat", "1"],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 4  # the header and the four configurations
    assert "the flush in a turn" in done.stdout
