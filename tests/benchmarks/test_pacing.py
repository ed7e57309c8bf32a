"""``benchmarks/pacing.py`` still runs and prints every row: a smoke run, never a timing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.pacing import LIMIT_DB, NO_LIMIT, OFF, PACED, table
from tests.celery_support import redis_url

ROOT = Path(__file__).resolve().parents[2]


def test_the_table_sets_each_row_beside_the_baseline():
    text = table(100, {OFF: [0.5], NO_LIMIT: [0.51], LIMIT_DB: [0.7], PACED: [2.0]})
    assert f"| {OFF} | 500 ms | 5.00 ms | — |" in text
    assert f"| {NO_LIMIT} | 510 ms | 5.10 ms | +0.10 ms |" in text
    assert f"| {PACED} | 2000 ms | 20.00 ms | +15.00 ms |" in text


def test_a_quick_run_prints_every_row():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "pacing.py"), "--quick",
         "--redis-url", redis_url()],
        cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ")]
    names = {OFF, NO_LIMIT, LIMIT_DB, PACED}
    assert names <= {row.split(" | ")[0].removeprefix("| ") for row in rows}
