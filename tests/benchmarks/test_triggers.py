"""``benchmarks/triggers.py`` prints how soon a parent's end starts its child: a smoke
run on real workers, never a timing."""

from __future__ import annotations

import pytest

from benchmarks.triggers import table
from tests.celery_support import redis_url


def test_the_table_shows_the_median_the_95th_percentile_and_the_target():
    figures = {"taken": [0.01] * 19 + [0.5], "started": [0.02] * 18 + [0.9, 1.5]}
    text = table(20, figures)
    assert "| parent finished → child created (the event taken) | 10 ms | 10 ms | 500 ms |" in text
    assert "| parent finished → child started | 20 ms | 900 ms | 1500 ms |" in text
    assert text.endswith("| 900 ms | met |")
    late = table(20, {"taken": [0.01] * 20, "started": [2.0] * 20})
    assert late.endswith("| 2000 ms | NOT MET |")


@pytest.mark.postgres
def test_a_quick_run_on_a_worker_starts_every_child(postgres_server_url, run_benchmark):
    out = run_benchmark(
        "triggers.py", "--quick", "--every", "0.05",
        "--database-url", postgres_server_url, "--redis-url", redis_url(),
    )  # fmt: skip
    assert "| 5 parents | median | 95th percentile | slowest |" in out
    assert "| child started within 1 s of its parent's end (95th percentile) |" in out
