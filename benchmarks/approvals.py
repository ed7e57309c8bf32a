"""How soon a decided approval step lets its run go on: ``benchmarks/approvals.py``.

``--runs`` runs of a workflow whose `approval` step sits between two transforms are
started on a real Celery worker (prefork, ``--concurrency``, Redis, a throwaway
PostgreSQL database) and left to wait; the broker's messages for the worker's queue
are counted while they all wait (none: a waiting run holds no task). Each is then
approved in turn, one every ``--every`` seconds, through the one decision service the
admin, the API and the MCP server use. For each run: the time from the decision's
commit to the run's ``finished_at`` (the step settled, the next step queued, run and
finished on the worker). Prints the median, the 95th percentile and the slowest, and
the target: the run finished within 1 s of its approval at the 95th percentile.
Asserts nothing; exits 0. See docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script

from benchmarks._support import throwaway_database  # noqa: E402
from benchmarks._workers import (  # noqa: E402
    Workers,
    add_worker_arguments,
    broker_messages,
    database_url,
    percentile,
    point_celery_at,
)

TARGET_SECONDS = 1.0
DEADLINE_SECONDS = 300

FLOW = {
    "name": "approved_sum",
    "inputs": {"n": {"type": "integer", "default": 1}},
    "steps": [
        {"id": "double", "kind": "transform", "expression": "{total: sum([n, n])}",
         "input_mapping": {"n": "$input.n"}},
        {"id": "confirm", "kind": "approval", "approvers": ["bench"],
         "input_mapping": {"total": "double.total"}},
        {"id": "report", "kind": "transform", "expression": "total",
         "input_mapping": {"total": "double.total"}},
    ],
    "edges": [{"from": "double", "to": "confirm"}, {"from": "confirm", "to": "report"}],
}  # fmt: skip


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[1])
    parser.add_argument("--runs", type=int, default=50, help="waiting runs (50)")
    parser.add_argument("--every", type=float, default=0.2, help="seconds between decisions")
    add_worker_arguments(parser)
    parser.add_argument("--quick", action="store_true", help="5 runs: a smoke run")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = 5
    return args


def _wait_for(predicate: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_SECONDS
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"not {what} within {DEADLINE_SECONDS} s")
        time.sleep(0.05)


def measure(args: argparse.Namespace) -> tuple[str, int, list[float]]:
    with throwaway_database(args.database_url) as where, Workers(
        count=1, concurrency=args.concurrency, redis_url=args.redis_url,
        database_url=database_url(), name="approvals",
    ) as workers:  # fmt: skip
        point_celery_at(args.redis_url, workers.queue)
        from django.contrib.auth import get_user_model
        from django.utils import timezone

        from runs.approvals import approval_decide
        from runs.models import ApprovalRequest, Run, RunStatus, RunTrigger
        from runs.services import run_create, run_enqueue
        from workflows.services import workflow_activate_trusted, workflow_import

        workflow, _ = workflow_import(data=FLOW)
        workflow = workflow_activate_trusted(workflow=workflow)
        person = get_user_model().objects.create_user(username="bench")
        created = (
            run_create(workflow=workflow, trigger=RunTrigger.API, inputs={"n": n})
            for n in range(args.runs)
        )
        ids = [run_enqueue(run=run).pk for run in created]
        runs = Run.objects.filter(pk__in=ids)
        _wait_for(lambda: runs.filter(status=RunStatus.WAITING).count() == len(ids), "waiting")
        held = broker_messages(args.redis_url, workers.queue)
        decided: dict[int, datetime] = {}
        for request in ApprovalRequest.objects.filter(run_id__in=ids).order_by("run_id"):
            approval_decide(request_id=request.pk, user=person, approve=True, via="api")
            decided[request.run_id] = timezone.now()
            time.sleep(args.every)
        _wait_for(lambda: runs.filter(status=RunStatus.SUCCEEDED).count() == len(ids), "finished")
        went_on = [
            (run.finished_at - decided[run.pk]).total_seconds()
            for run in runs.only("pk", "finished_at")
        ]
    return where, held, went_on


def table(runs: int, held: int, went_on: list[float]) -> str:
    p95 = percentile(went_on, 0.95)
    met = "met" if p95 <= TARGET_SECONDS else "NOT MET"
    return "\n".join(
        [
            f"| {runs} runs | median | 95th percentile | slowest |",
            "|---|---|---|---|",
            f"| approved → run finished | {statistics.median(went_on) * 1000:.0f} ms | "
            f"{p95 * 1000:.0f} ms | {max(went_on) * 1000:.0f} ms |",
            "",
            f"Broker messages while the {runs} runs waited: {held}.",
            "",
            "| target | measured | met |",
            "|---|---|---|",
            f"| run finished within {TARGET_SECONDS:g} s of its approval (95th percentile) "
            f"| {p95 * 1000:.0f} ms | {met} |",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    where, held, went_on = measure(args)
    print(
        f"approval steps on Celery — {args.runs} waiting runs, approved one every "
        f"{args.every:g} s, one worker (prefork, -c {args.concurrency}, Redis), {where}\n"
    )
    print(table(args.runs, held, went_on))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
