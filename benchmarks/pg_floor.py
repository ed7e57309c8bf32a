"""What a durable write costs on this PostgreSQL: ``benchmarks/pg_floor.py``.

The engine's floor on PostgreSQL is physical: a checkpoint is durable when its commit
has flushed the write-ahead log to disk (``synchronous_commit = on``, which the
product keeps). This measures, on a scratch database of its own and interleaved try
by try so that a change in the machine's load falls on every row alike:

- ``SELECT 1``: one round trip, nothing written;
- one ``UPDATE`` in autocommit with ``synchronous_commit = off``: a round trip and a
  write to the log, not waited for on disk (the baseline: never used by the product);
- the same ``UPDATE`` with ``synchronous_commit = on``: the same and the flush;
- a chain step's turn as the engine sends it: one statement updating two rows (the
  settled step and the next one's claim), committed and flushed.

The flush is the difference of the two UPDATE rows. A chain step on PostgreSQL costs
at least one turn (one flush) plus the engine's own Python per step (the same code
as on SQLite); a run's fixed cost at least three flushes (its rows, its first turn
with its start, its last turn with its finish). ``docs/benchmarks.md`` sets these
floors beside the engine's figures. Prints a table; asserts nothing; exits 0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlparse, urlunparse

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"


NO_FLUSH = "UPDATE, synchronous_commit = off (round trip, log written)"
FLUSH = "UPDATE, synchronous_commit = on (the same and the flush)"


@dataclass(frozen=True)
class Row:
    name: str
    min_ms: float
    median_ms: float


def _url_for(url: str, database: str) -> str:
    return urlunparse(urlparse(url)._replace(path=f"/{database}"))


def measure(url: str, tries: int) -> list[Row]:
    """Each case's min and median over ``tries`` interleaved tries, on a scratch
    database made and dropped here."""
    import psycopg

    scratch = f"flowpilot_floor_{os.getpid()}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {scratch}")
    try:
        with psycopg.connect(_url_for(url, scratch), autocommit=True) as conn:
            conn.execute("CREATE TABLE step (id int PRIMARY KEY, status text, n int)")
            conn.execute("INSERT INTO step VALUES (1, 'running', 0), (2, 'pending', 0)")

            def select() -> None:
                conn.execute("SELECT 1").fetchone()

            def update() -> None:
                conn.execute("UPDATE step SET n = n + 1 WHERE id = 1")

            def turn() -> None:
                conn.execute(
                    "WITH settled AS (UPDATE step SET status = 'succeeded', n = n + 1"
                    " WHERE id = 1 RETURNING id)"
                    " UPDATE step SET status = 'running', n = n + 1"
                    " WHERE id = 2 AND EXISTS (SELECT 1 FROM settled)"
                )

            cases: dict[str, Callable[[], None]] = {
                "SELECT 1 (a round trip)": select,
                NO_FLUSH: update,
                FLUSH: update,
                "a chain step's turn: one statement, two rows, flushed": turn,
            }
            times: dict[str, list[float]] = {name: [] for name in cases}
            modes = {NO_FLUSH: "off"}
            for _ in range(tries):
                for name, case in cases.items():
                    conn.execute(f"SET synchronous_commit = {modes.get(name, 'on')}")  # untimed
                    started = time.perf_counter()
                    case()
                    times[name].append((time.perf_counter() - started) * 1000)
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {scratch} WITH (FORCE)")
    return [Row(name, min(values), statistics.median(values)) for name, values in times.items()]


def table(rows: list[Row]) -> str:
    lines = [
        "| measurement (PostgreSQL, same machine) | min | median |",
        "|---|---|---|",
        *(f"| {row.name} | {row.min_ms:.3f} ms | {row.median_ms:.3f} ms |" for row in rows),
    ]
    by_name = {row.name: row for row in rows}
    if NO_FLUSH in by_name and FLUSH in by_name:
        flush = by_name[FLUSH].median_ms - by_name[NO_FLUSH].median_ms
        lines += ["", f"the flush (median with it - median without): {flush:.3f} ms"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--tries", type=int, default=400)
    args = parser.parse_args(argv)
    print(f"PostgreSQL at {urlparse(args.database_url).hostname}, {args.tries} tries each")
    print(table(measure(args.database_url, args.tries)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
