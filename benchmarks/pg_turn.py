"""Where a chain step's time goes on PostgreSQL: ``benchmarks/pg_turn.py``.

``pg_floor.py`` times a durable write on a table of its own; this times the engine's
own turns. It runs a chain of ``--steps`` calls in process (``run_create`` +
``run_execute``, the loopback server of ``compare.py``) on a throwaway database, in four
configurations of the engine's connection, interleaved run by run so that a change in
the machine's load falls on all four alike:

- the turn statements **prepared** (``DATABASE_PREPARE_THRESHOLD``, the default) or
  **not** (parsed and planned by the server at every step);
- each commit **flushed** (``synchronous_commit = on``, what the product keeps) or
  **not** (``off``: only to size the flush; never used by the product).

For each it prints the median time of a turn statement as the engine waited for it,
the run's wall time per step, and the plain call's (httpx alone) time per step. The
rest of a step — wall time minus the turn and the call — is the engine's own Python,
the same code on SQLite. The flush is the turn with it minus the turn without it: the
physical part of a step that no change of the engine's code removes. Prints; asserts
nothing; exits 0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/postgres"
TURN = 'WITH w0 AS (UPDATE "runs_stepresult"'  # a chain step's turn: outcome + next claim


@dataclass(frozen=True)
class Config:
    prepared: bool
    flushed: bool

    @property
    def name(self) -> str:
        return (
            f"{'prepared' if self.prepared else 'parsed every time'}, "
            f"{'flushed' if self.flushed else 'not flushed'}"
        )


CONFIGS = [Config(p, f) for p in (True, False) for f in (True, False)]


@dataclass(frozen=True)
class Figures:
    config: Config
    turn_ms: float  # median of the turn statements
    step_ms: float  # the run's wall time per step
    plain_ms: float  # the plain call per step


def measure(url: str, steps: int, repeat: int) -> list[Figures]:
    from benchmarks._support import LoopbackServer, throwaway_database

    with throwaway_database(url), LoopbackServer() as server:
        from django.db import connection

        from benchmarks import _measure

        _measure.store_tool(server.url)
        run = _measure.in_process(_measure.prepare(_measure.shape("chain", steps)))
        plain = _measure.plain(server.url, "chain", steps, delay_ms=0, slots=1)
        turns: list[float] = []

        def timed(execute, sql, params, many, context):
            started = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                if sql.startswith(TURN):
                    turns.append((time.perf_counter() - started) * 1000)

        run()
        plain()  # warm: the caches, the connections, the prepared statements
        threshold = connection.connection.prepare_threshold
        samples: dict[Config, tuple[list[float], list[float], list[float]]] = {
            config: ([], [], []) for config in CONFIGS
        }
        for _ in range(repeat):
            for config in CONFIGS:
                connection.connection.prepare_threshold = threshold if config.prepared else None
                with connection.cursor() as cursor:
                    mode = "on" if config.flushed else "off"
                    cursor.execute(f"SET synchronous_commit = {mode}")
                turns.clear()
                with connection.execute_wrapper(timed):
                    started = time.perf_counter()
                    run()
                    wall = (time.perf_counter() - started) * 1000
                started = time.perf_counter()
                plain()
                plain_ms = (time.perf_counter() - started) * 1000
                turn_list, step_list, plain_list = samples[config]
                turn_list.append(statistics.median(turns))
                step_list.append(wall / steps)
                plain_list.append(plain_ms / steps)
        connection.connection.prepare_threshold = threshold
    return [
        Figures(config, *(statistics.median(values) for values in samples[config]))
        for config in CONFIGS
    ]


def table(figures: list[Figures]) -> str:
    lines = [
        "| turn statements, commits | a turn (median) | a step (wall) | the plain call "
        "| the rest: the engine's Python |",
        "|---|---|---|---|---|",
    ]
    for f in figures:
        rest = f.step_ms - f.turn_ms - f.plain_ms
        lines.append(
            f"| {f.config.name} | {f.turn_ms:.3f} ms | {f.step_ms:.3f} ms "
            f"| {f.plain_ms:.3f} ms | {rest:.3f} ms |"
        )
    by = {f.config: f for f in figures}
    flush = by[Config(True, True)].turn_ms - by[Config(True, False)].turn_ms
    parse = by[Config(False, True)].turn_ms - by[Config(True, True)].turn_ms
    lines += [
        "",
        f"the flush in a turn (prepared: flushed - not flushed): {flush:.3f} ms",
        f"what preparing saves a turn (flushed: parsed every time - prepared): {parse:.3f} ms",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", DEFAULT_URL))
    parser.add_argument("--steps", type=int, default=100, help="steps in the chain (100)")
    parser.add_argument("--repeat", type=int, default=7, help="runs per configuration (7)")
    args = parser.parse_args(argv)
    print(
        f"a chain of {args.steps} in process on PostgreSQL, {args.repeat} runs per "
        "configuration, interleaved; medians",
        flush=True,
    )
    print(table(measure(args.database_url, args.steps, args.repeat)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
