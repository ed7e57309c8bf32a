"""The benchmark harness still runs: ``benchmarks/compare.py --quick`` at tiny sizes.

A smoke test, never a timing: it checks the printed tables have every row, column and
target, so the harness cannot rot unnoticed. The SQLite sections run on every pass;
the PostgreSQL and Celery sections (real workers, raw Celery beside flowpilot's) on the
PostgreSQL pass, with Redis. ``_report`` is also checked on figures made up here, so
"met" and "NOT MET" follow the targets.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import _report
from tests.celery_support import redis_url, require_services

ROOT = Path(__file__).resolve().parent.parent
HARNESS = [sys.executable, str(ROOT / "benchmarks" / "compare.py"), "--quick", "--scale", "3"]


def harness(*args: str) -> str:
    done = subprocess.run(
        [*HARNESS, *args], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def table_rows(text: str, first_cell: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in text.splitlines()
        if line.startswith(f"| {first_cell}")
    ]


@pytest.mark.slow
def test_the_sqlite_sections_print_the_comparison_the_scaling_table_and_the_targets():
    out = harness("--no-postgres")

    header = table_rows(out, "shape |")[0]
    assert header[2:] == list(_report.COLUMNS)
    chain = table_rows(out, "chain of 5")
    assert [row[1] for row in chain] == [
        "wall time",
        "overhead per step (over plain)",
        "x plain Python",
    ]
    for row in chain:
        assert "-" not in (row[2], row[4])  # plain Python and SQLite measured
        assert row[3] == row[5] == row[6] == "-"  # no raw Celery, PostgreSQL, Celery
    assert table_rows(out, "1-step run (fixed cost)")
    scaled = [(row[0], row[1]) for row in table_rows(out, "chain |") + table_rows(out, "wide |")]
    assert scaled == [("chain", "3"), ("wide", "3")]
    targets = {row[0]: row[2] for row in table_rows(out, "in process, SQLite:")}
    assert set(targets) == {
        "in process, SQLite: overhead per chain step <= 1 ms",
        "in process, SQLite: fan-out <= 1.2x the floor",
        "in process, SQLite: fixed per-run cost <= 5 ms",
    }
    assert set(targets.values()) <= {"met", "NOT MET"}
    (traced,) = table_rows(out, "sqlite | 5 |")  # the chain with tracing off and on
    assert traced[2].endswith(" ms")
    assert traced[3].endswith(" ms")
    assert int(traced[6].replace(",", "")) > 0  # spans reached the loopback receiver


@pytest.mark.postgres
@pytest.mark.celery
@pytest.mark.django_db
@pytest.mark.slow
def test_the_postgresql_and_celery_sections_measure_raw_celery_beside_flowpilot():
    require_services()
    server = os.environ.get("DATABASE_URL") or os.environ["FLOWPILOT_TEST_POSTGRES_URL"]
    # Two slots: one worker process with two pool processes is enough to see every row,
    # and costs a fifth less CPU than the default eight.
    out = harness("--only", "inprocess", "--only", "celery", "--database-url", server,
                  "--redis-url", redis_url(), "--slots", "2")  # fmt: skip

    for row in table_rows(out, "chain of 5") + table_rows(out, "fan-out 4 x 20 ms"):
        assert "-" not in row[2:7] or row[1] == "x plain Python", row
    hop = table_rows(out, "Celery chain hop")
    assert [row[2] in {"met", "NOT MET"} for row in hop] == [True]
    assert table_rows(out, "flowpilot on Celery: fan-out")
    scaled = [(row[0], row[1]) for row in table_rows(out, "chain |") + table_rows(out, "wide |")]
    assert scaled == [("chain", "3"), ("wide", "3")]  # the Celery scaling table


# --- the report on made-up figures ----------------------------------------------------


def figures(t: float, plain: float, n: int, **more: float) -> dict:
    return {"n": n, "plain": plain, "flowpilot": t, **more}


def made_up(*, per_step_ms: float, hop_ratio: float, wide_ratio: float = 1.1) -> dict:
    steps = 100
    chain = figures(0.1 + per_step_ms * steps / 1000, 0.1, steps)
    local = {
        "chain": chain,
        "fanout": figures(0.33, 0.3, 20),
        "wide": figures(0.3, 0.2, 200),
        "one": figures(0.004, 0.001, 1),
    }
    celery = {
        key: {**value, "raw_celery": value["plain"] * 1.2, "flowpilot": value["plain"] * 1.3}
        for key, value in local.items()
    }
    celery["chain"]["flowpilot"] = celery["chain"]["raw_celery"] * hop_ratio
    celery["wide"]["flowpilot"] = celery["wide"]["raw_celery"] * wide_ratio
    scale = [
        {"shape": shape, "n": n, "plain": n * 0.0005, "flowpilot": n * 0.0015, "peak_mb": n / 100}
        for shape in ("chain", "wide")
        for n in (10, 100, 1000)
    ]
    return {
        "machine": {"commit": "abc", "python": "3.11", "cores": 2, "load": 0.5},
        "args": {"chain": 100, "fanout": 20, "delay_ms": 100, "wide": 200, "repeat": 1, "slots": 8},
        "inprocess": {"sqlite": local, "postgresql": local},
        "celery": celery,
        "scale": scale,
    }


def verdicts(text: str) -> dict[str, str]:
    return {
        row[0]: row[2] for row in (line.strip("|").split("|") for line in text.splitlines())
        if len(row) == 3 and row[0].strip() != "target" and row[2].strip() in {"met", "NOT MET"}
    }  # fmt: skip


def test_the_report_says_met_exactly_where_the_figures_are_within_the_targets():
    good = verdicts(_report.report(made_up(per_step_ms=0.5, hop_ratio=0.9, wide_ratio=1.4)))
    bad = verdicts(_report.report(made_up(per_step_ms=3.0, hop_ratio=1.1, wide_ratio=1.6)))

    assert all(v.strip() == "met" for v in good.values()), good
    per_step = " in process, SQLite: overhead per chain step <= 1 ms "
    hop = " Celery chain hop <= 1x raw Celery's "
    wide = " Celery wide graph per step <= 1.5x raw Celery's "
    assert (good[per_step], bad[per_step]) == (" met ", " NOT MET ")
    assert (good[hop], bad[hop]) == (" met ", " NOT MET ")
    assert (good[wide], bad[wide]) == (" met ", " NOT MET ")
    assert len(good) == 13


def test_tracing_on_is_met_within_five_percent_of_tracing_off():
    results = made_up(per_step_ms=0.5, hop_ratio=0.9)
    results["tracing"] = {
        "sqlite": {"n": 100, "off": 0.100, "on": 0.104, "inline": 0.102, "spans": 1005},
        "postgresql": {"n": 100, "off": 0.100, "on": 0.106, "inline": 0.101, "spans": 1005},
    }
    text = _report.report(results)
    found = verdicts(text)
    assert found[" sqlite: chain with tracing on <= 5 % over tracing off "] == " met "
    assert found[" postgresql: chain with tracing on <= 5 % over tracing off "] == " NOT MET "
    assert "| sqlite | 100 | 100.0 ms | 104.0 ms | +4.0 % | 2.0 % | 1,005 |" in text
