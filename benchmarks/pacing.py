"""What rate limits and adaptive pacing cost a run: ``benchmarks/pacing.py``.

A chain of ``--chain`` calls (each sends the previous answer) to the loopback ping
server, in process, through ``run_create`` + ``run_execute`` like ``manage.py runflow``,
on a throwaway database (SQLite, or PostgreSQL with ``--database-url``). Rows,
interleaved try by try so a change in the machine's load falls on every row alike:

- **pacing off** (``FLOWPILOT_RATE_LIMIT_BACKEND=off``): the call path as it was before
  rate limits (one ``None`` check per call): the baseline;
- **no limit set** (the default backend, the database here): a tool without
  ``rate_limit``, whose API sent no rate header: what every existing tool pays;
- **limit set, database** / **limit set, Redis** (``--redis-url``, when reachable): the
  same tool with ``rate_limit: {requests: 1000000, per: 1}``, never waiting: the cost of
  reserving each call's slot in the shared store;
- **limit 50/s**: ``rate_limit: {requests: 50, per: 1}``: the chain is paced, its
  time set by the limit (at least (n - 1) / 50 s).

Each row: the median run, the per-step time, and the difference per step from the
baseline. Prints a table; asserts nothing; exits 0. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script

from benchmarks._support import LoopbackServer, throwaway_database  # noqa: E402

OFF, NO_LIMIT = "pacing off (the baseline)", "no limit set (the default)"
LIMIT_DB, LIMIT_REDIS = "limit set, never waiting: database", "limit set, never waiting: Redis"
PACED = "limit 50/s (paced)"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--chain", type=int, default=100, help="steps in the chain (100)")
    parser.add_argument("--repeat", type=int, default=7, help="timed runs per row (7)")
    parser.add_argument("--quick", action="store_true", help="chain 5, one repeat: a smoke run")
    parser.add_argument("--database-url", help="a PostgreSQL server (default: SQLite)")
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("FLOWPILOT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/14"),
        help="Redis for the Redis row (left out when unreachable)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.chain, args.repeat = 5, 1
    return args


def _redis_up(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_timeout=2).ping())
    except redis.RedisError:
        return False


def measure(args: argparse.Namespace) -> tuple[str, dict[str, list[float]]]:
    with LoopbackServer() as server, throwaway_database(args.database_url) as where:
        from django.conf import settings

        from benchmarks._cases import TOOL, chain_definition, ping_tool
        from runs.models import RunStatus, RunTrigger
        from runs.services import run_create, run_execute
        from tools.ratelimit.redis_store import RedisPaceStore
        from tools.services import tool_upsert
        from tools.spec import ToolSpec
        from workflows.services import workflow_import

        def tool(name: str, limit: dict | None) -> None:
            data = ping_tool(server.url).stored()
            data.update(name=name, rate_limit=limit)
            tool_upsert(spec=ToolSpec.model_validate(data), source="benchmarks/pacing.py")

        def chain(tool_name: str) -> Callable[[], None]:
            definition = chain_definition(args.chain)
            definition["name"] = f"bench_pacing_{tool_name}"
            for step in definition["steps"]:
                step["tool"] = tool_name
            workflow, _ = workflow_import(data=definition)

            def run() -> None:
                done = run_execute(run=run_create(workflow=workflow, trigger=RunTrigger.CLI))
                if done.status != RunStatus.SUCCEEDED:
                    raise RuntimeError(f"the chain ended {done.status}: {done.error_summary}")

            return run

        tool(TOOL, None)
        tool("bench_ping_limited", {"requests": 1_000_000, "per": 1})
        tool("bench_ping_paced", {"requests": 50, "per": 1})
        redis_url = args.redis_url if _redis_up(args.redis_url) else ""
        store = RedisPaceStore.from_url(redis_url) if redis_url else None
        cases: dict[str, tuple[Callable[[], None], dict[str, object]]] = {
            OFF: (chain(TOOL), {"FLOWPILOT_RATE_LIMIT_BACKEND": "off"}),
            NO_LIMIT: (chain(TOOL), {"FLOWPILOT_RATE_LIMIT_BACKEND": "database"}),
            LIMIT_DB: (chain("bench_ping_limited"), {"FLOWPILOT_RATE_LIMIT_BACKEND": "database"}),
            PACED: (chain("bench_ping_paced"), {"FLOWPILOT_RATE_LIMIT_BACKEND": "database"}),
        }
        if redis_url:
            redis_settings = {
                "FLOWPILOT_RATE_LIMIT_BACKEND": "redis",
                "FLOWPILOT_RATE_LIMIT_REDIS_URL": redis_url,
            }
            cases[LIMIT_REDIS] = (chain("bench_ping_limited"), redis_settings)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for attempt in range(args.repeat + 1):  # the first round warms up, untimed
            for name, (run, values) in cases.items():
                for key, value in values.items():
                    setattr(settings, key, value)
                if store is not None:
                    store.reset(None)
                started = time.perf_counter()
                run()
                if attempt:
                    times[name].append(time.perf_counter() - started)
        if store is not None:
            store.reset(None)
            store.close()
        return where, times


def table(chain: int, times: dict[str, list[float]]) -> str:
    base = statistics.median(times[OFF]) / chain * 1000
    lines = [
        f"| chain {chain} x http, in process | median run | per step | vs pacing off, per step |",
        "| --- | ---: | ---: | ---: |",
    ]
    for name, runs in times.items():
        median = statistics.median(runs)
        step = median / chain * 1000
        delta = "—" if name == OFF else f"{step - base:+.2f} ms"
        lines.append(f"| {name} | {median * 1000:.0f} ms | {step:.2f} ms | {delta} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    where, times = measure(args)
    print(f"pacing benchmark on {where}; {args.repeat} timed runs per row, interleaved")
    print(table(args.chain, times))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
