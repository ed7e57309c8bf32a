"""The sections of ``benchmarks/compare.py``, each run in a child process of its own.

``run(kind, params, args)`` sets Django up on a throwaway database, starts the loopback
server, measures, and prints one ``RESULT {json}`` line for the parent. Times are
seconds (medians), memory MiB.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from contextlib import ExitStack

from benchmarks._support import LoopbackServer, throwaway_database
from benchmarks._workers import Workers, database_url, point_celery_at

LARGE = 1000  # above this many steps a scaling figure is one run, no warm-up
ONE_REPEAT = 5  # the one-step rows time --repeat x this many runs: each is a few ms


def run(kind: str, params: dict, args: argparse.Namespace) -> int:
    db = None if params["db"] == "sqlite" else params["db"]
    with throwaway_database(db) as where, LoopbackServer() as server:
        from benchmarks import _measure

        _measure.store_tool(server.url)
        _measure.set_slots(args.slots)
        section = {
            "inprocess": _inprocess,
            "celery": _celery,
            "scale": _scale,
            "tracing": _tracing,
        }[kind]
        result = {"where": where, **section(_measure, server.url, params, args)}
    print("RESULT " + json.dumps(result), flush=True)
    return 0


def shapes(args: argparse.Namespace) -> Iterator[tuple[str, str, int, int]]:
    """(row, kind, steps, delay ms) of the comparison table."""
    yield "chain", "chain", args.chain, 0
    yield "fanout", "wide", args.fanout, args.delay_ms
    yield "wide", "wide", args.wide, 0
    yield "one", "chain", 1, 0


def _inprocess(m, url: str, params: dict, args: argparse.Namespace) -> dict:
    out = {}
    for row, kind, n, delay in shapes(args):
        print(f"  in process: {row} ({n})", file=sys.stderr, flush=True)
        workflow = m.prepare(m.shape(kind, n, delay))
        flowpilot, repeat = m.in_process(workflow), args.repeat
        if row == "one":
            warm_one_step(flowpilot, runs=args.chain)
            repeat = args.repeat * ONE_REPEAT
        out[row] = {
            "n": n,
            "plain": m.median_of(_plain(m, url, kind, n, delay, args), repeat),
            "flowpilot": m.median_of(flowpilot, repeat),
        }
    return out


def warm_one_step(run: Callable[[], object], *, runs: int) -> None:
    """Warm the one-step row as the chain row is warmed: the chain's warm-up run sends
    each of the engine's statements ``--chain`` times; one one-step run sends each once,
    and a statement is prepared on a PostgreSQL connection after 5 uses and planned
    generically by the server only after 5 more. After a single warm-up run the
    one-step figure was those statements' cold start (about 8 ms a run on PostgreSQL
    here, settling at about 4.7 ms after 20 runs), not a run's fixed cost."""
    for _ in range(runs):
        run()


def _plain(m, url: str, kind: str, n: int, delay: int, args: argparse.Namespace):
    return m.plain(url, kind, n, delay_ms=delay, slots=args.slots)


def _celery(m, url: str, params: dict, args: argparse.Namespace) -> dict:
    common = {"count": 1, "concurrency": args.slots, "redis_url": args.redis_url}
    out = {}
    with ExitStack() as stack:
        flow = stack.enter_context(Workers(database_url=database_url(), **common))
        raw = stack.enter_context(
            Workers(database_url="", app="benchmarks.raw_celery", name="raw", **common)
        )
        point_celery_at(args.redis_url, flow.queue)
        m.point_raw_at(args.redis_url, raw.queue)
        # Every raw pool process makes its HTTP client once before timing, as flowpilot's
        # processes are warmed per workflow (warm_celery).
        m.raw_celery(url, "wide", args.slots * 2, delay_ms=50)()
        for row, kind, n, delay in shapes(args):
            print(f"  Celery: {row} ({n})", file=sys.stderr, flush=True)
            workflow = m.prepare(m.shape(kind, n, delay))
            out[row] = {
                "n": n,
                "plain": m.median_of(_plain(m, url, kind, n, delay, args), args.repeat),
                "raw_celery": m.median_of(m.raw_celery(url, kind, n, delay_ms=delay), args.repeat),
                "flowpilot": _warm_then(m, workflow, args),
            }
        out["scale"] = [_celery_size(m, url, kind, n, args) for kind in ("chain", "wide")
                        for n in args.celery_scale]  # fmt: skip
    return out


def _celery_size(m, url: str, kind: str, n: int, args: argparse.Namespace) -> dict:
    """One run of each (after a warm-up run up to 100 steps): a hop's cost as N grows."""
    print(f"  Celery scaling: {kind} ({n})", file=sys.stderr, flush=True)
    workflow = m.prepare(m.shape(kind, n))
    if n <= 100:
        m.warm_celery(workflow, args.slots)
    return {
        "shape": kind,
        "n": n,
        "plain": m.median_of(_plain(m, url, kind, n, 0, args), 1),
        "raw_celery": m.median_of(m.raw_celery(url, kind, n, delay_ms=0), 1, warm=n <= 100),
        "flowpilot": m.median_of(m.on_celery(workflow), 1, warm=False),
    }


def _warm_then(m, workflow, args: argparse.Namespace) -> float:
    m.warm_celery(workflow, args.slots)
    return m.median_of(m.on_celery(workflow), args.repeat, warm=False)


def _scale(m, url: str, params: dict, args: argparse.Namespace) -> dict:
    kind, n = params["kind"], params["n"]
    warm = m.prepare(m.shape(kind, 2))
    m.in_process(warm)()
    base = m.peak_rss_mb()
    workflow = m.prepare(m.shape(kind, n))
    repeat = args.repeat if n <= LARGE else 1
    engine = m.median_of(m.in_process(workflow), repeat, warm=n <= LARGE)
    peak = m.peak_rss_mb()
    plain = m.median_of(m.plain(url, kind, n, delay_ms=0, slots=args.slots), repeat)
    heap = m.heap_peak_mb(m.in_process(workflow))  # one more run, traced (slower, untimed)
    return {"plain": plain, "flowpilot": engine, "peak_mb": peak - base, "heap_mb": heap}


TRACE_BLOCK = 2  # chain runs per timed block of the tracing section
TRACE_PAIRS = 4  # pairs of blocks (off, on) per --repeat


def _tracing(m, url: str, params: dict, args: argparse.Namespace) -> dict:
    """The chain in process with tracing off and on, in pairs of blocks of
    ``TRACE_BLOCK`` runs (``TRACE_PAIRS`` x ``--repeat`` pairs, the order within a pair
    alternating, so a drift of the machine's speed touches both sides alike): on,
    every try and call is a span, sent over OTLP/HTTP to a loopback receiver by the
    batch processor, and the block's time includes sending them all (a flush at its
    end; each block starts with a collected heap). ``ratio`` is the median of the
    pairs' on/off ratios and ``interval`` its 90 %
    bootstrap interval; ``off`` and ``on`` the medians of the per-run times; ``inline``
    a traced run alone, its spans made and queued, not yet sent."""
    import gc
    import os
    import statistics
    import time

    from django.conf import settings

    from benchmarks._support import TraceSink
    from runs.engine.tracing import flush_traces, shutdown_tracing

    with TraceSink() as sink:
        os.environ["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = f"{sink.url}/v1/traces"
        settings.FLOWPILOT_TRACE_EXPORTERS = ("otlp",)
        workflow = m.prepare(m.shape("chain", args.chain, 0))
        run = m.in_process(workflow)

        def block(tracing: bool) -> tuple[float, float]:
            settings.FLOWPILOT_TRACING = tracing
            # Untimed: a full collection owed to earlier blocks (tens of ms in this
            # process) would otherwise land in one block or the other at random.
            gc.collect()
            started = time.perf_counter()
            for _ in range(TRACE_BLOCK):
                run()
            ran = time.perf_counter()
            if tracing:
                flush_traces()
            return (time.perf_counter() - started) / TRACE_BLOCK, (ran - started) / TRACE_BLOCK

        block(False), block(True)  # warm both, and the exporter
        off, on, inline, ratios = [], [], [], []
        for pair in range(TRACE_PAIRS * args.repeat):
            first = pair % 2 == 1  # on first in every other pair
            got = {tracing: block(tracing) for tracing in (first, not first)}
            off.append(got[False][0])
            on.append(got[True][0])
            inline.append(got[True][1])
            ratios.append(got[True][0] / got[False][0])
        shutdown_tracing()
        return {
            "n": args.chain,
            "off": statistics.median(off),
            "on": statistics.median(on),
            "inline": statistics.median(inline),
            "ratio": statistics.median(ratios),
            "interval": _median_interval(ratios),
            "spans": sink.spans,
        }


def _median_interval(values: list[float], *, resamples: int = 2000) -> tuple[float, float]:
    """A 90 % bootstrap interval of ``values``' median (a fixed seed: the same figures
    give the same interval)."""
    import random
    import statistics

    draw = random.Random(0)
    medians = sorted(
        statistics.median(draw.choices(values, k=len(values))) for _ in range(resamples)
    )
    return medians[int(resamples * 0.05)], medians[int(resamples * 0.95) - 1]
