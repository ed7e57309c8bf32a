"""How soon another workflow's finished run starts the waiting one: ``benchmarks/triggers.py``.

``--parents`` runs of a one-step workflow (``upstream``) are started on a real Celery
worker (prefork, ``--concurrency``, Redis, a throwaway PostgreSQL database), one every
``--every`` seconds, as a steady stream of events; a second workflow (``downstream``)
waits for them with an ``on_workflow`` trigger (docs/triggers.md). For each parent:
the time from its ``finished_at`` to its child's ``created_at`` (the event taken: the
run-finished hook, the event task, the event row and the run in one transaction) and
to its child's ``started_at`` (the run started on the workers). Prints the median, the
95th percentile and the slowest of each, and the target: the child started within 1 s
at the 95th percentile. Asserts nothing; exits 0. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script

from benchmarks._support import throwaway_database  # noqa: E402
from benchmarks._workers import (  # noqa: E402
    Workers,
    add_worker_arguments,
    database_url,
    percentile,
    point_celery_at,
)

TARGET_SECONDS = 1.0
DEADLINE_SECONDS = 300

UPSTREAM = {
    "name": "upstream",
    "inputs": {"n": {"type": "integer", "default": 1}},
    "steps": [
        {"id": "double", "kind": "transform", "expression": "sum([n, n])",
         "input_mapping": {"n": "$input.n"}},
    ],
}  # fmt: skip
DOWNSTREAM = {
    "name": "downstream",
    "inputs": {"total": {"type": "integer"}},
    "steps": [
        {"id": "echo", "kind": "transform", "expression": "total",
         "input_mapping": {"total": "$input.total"}},
    ],
    "triggers": [
        {"on_workflow": {"name": "upstream"}, "inputs": {"total": "$event.outputs.double"}}
    ],
}  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--parents", type=int, default=50, help="parent runs (50)")
    parser.add_argument("--every", type=float, default=0.2, help="seconds between parents (0.2)")
    add_worker_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="5 parents: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.parents = 5
    return args


def measure(args: argparse.Namespace) -> tuple[str, dict[str, list[float]]]:
    with throwaway_database(args.database_url) as where, Workers(
        count=1, concurrency=args.concurrency, redis_url=args.redis_url,
        database_url=database_url(), name="triggers",
    ) as workers:  # fmt: skip
        point_celery_at(args.redis_url, workers.queue)
        from runs.models import Run, RunTrigger
        from runs.services import run_create, run_enqueue
        from triggers.models import TriggerEvent
        from workflows.services import workflow_activate_trusted, workflow_import

        versions = {}
        for data in (UPSTREAM, DOWNSTREAM):
            workflow, _ = workflow_import(data=data)
            versions[data["name"]] = workflow_activate_trusted(workflow=workflow)
        parents = []
        for n in range(args.parents):
            run = run_create(workflow=versions["upstream"], trigger=RunTrigger.API, inputs={"n": n})
            parents.append(run_enqueue(run=run).pk)
            time.sleep(args.every)
        deadline = time.monotonic() + DEADLINE_SECONDS
        children = Run.objects.filter(trigger=RunTrigger.EVENT, started_at__isnull=False)
        while children.count() < len(parents):
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{children.count()} of {len(parents)} children started in {DEADLINE_SECONDS} s"
                )
            time.sleep(0.05)
        taken, started = [], []
        events = TriggerEvent.objects.filter(source_run_id__in=parents).select_related(
            "source_run", "run"
        )
        for event in events:
            finished = event.source_run.finished_at
            taken.append((event.run.created_at - finished).total_seconds())
            started.append((event.run.started_at - finished).total_seconds())
    return where, {"taken": taken, "started": started}


def table(parents: int, figures: dict[str, list[float]]) -> str:
    rows = {
        "parent finished → child created (the event taken)": figures["taken"],
        "parent finished → child started": figures["started"],
    }
    lines = [
        f"| {parents} parents | median | 95th percentile | slowest |",
        "|---|---|---|---|",
    ]
    for name, values in rows.items():
        lines.append(
            f"| {name} | {statistics.median(values) * 1000:.0f} ms | "
            f"{percentile(values, 0.95) * 1000:.0f} ms | {max(values) * 1000:.0f} ms |"
        )
    p95 = percentile(figures["started"], 0.95)
    met = "met" if p95 <= TARGET_SECONDS else "NOT MET"
    lines += [
        "",
        "| target | measured | met |",
        "|---|---|---|",
        f"| child started within {TARGET_SECONDS:g} s of its parent's end (95th percentile) "
        f"| {p95 * 1000:.0f} ms | {met} |",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    where, figures = measure(args)
    print(
        f"on_workflow triggers on Celery — {args.parents} parents, one every {args.every:g} s, "
        f"one worker (prefork, -c {args.concurrency}, Redis), {where}\n"
    )
    print(table(args.parents, figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
