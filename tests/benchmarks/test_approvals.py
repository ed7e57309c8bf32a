"""``benchmarks/approvals.py`` prints how soon an approval lets its run go on, and the
broker's messages while runs wait: a smoke run on a real worker, never a timing."""

from __future__ import annotations

import pytest

from benchmarks.approvals import table
from tests.celery_support import redis_url


def test_the_table_shows_the_median_the_95th_percentile_and_the_target():
    text = table(20, 0, [0.05] * 18 + [0.4, 1.5])
    assert "| approved → run finished | 50 ms | 400 ms | 1500 ms |" in text
    assert "Broker messages while the 20 runs waited: 0." in text
    assert text.endswith("| 400 ms | met |")
    assert table(20, 0, [2.0] * 20).endswith("| 2000 ms | NOT MET |")


@pytest.mark.postgres
def test_a_quick_run_on_a_worker_finishes_every_approved_run(postgres_server_url, run_benchmark):
    out = run_benchmark(
        "approvals.py", "--quick", "--every", "0.05",
        "--database-url", postgres_server_url, "--redis-url", redis_url(),
    )  # fmt: skip
    assert "| 5 runs | median | 95th percentile | slowest |" in out
    assert "Broker messages while the 5 runs waited: 0." in out
