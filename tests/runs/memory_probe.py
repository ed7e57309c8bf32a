"""The child process of ``test_memory_bounds``: run the hostile workflows, report as JSON.

``python -m tests.runs.memory_probe MODE BASE_URL`` with ``DATABASE_URL`` set. On a
SQLite file it migrates first (the parent's test database is in memory). MODE
``local`` executes each run in this process; ``celery`` starts one real ``celery
worker`` (a child of this process, pool of one) on a queue of its own, enqueues the
runs, waits for them, and stops the worker, so ``RUSAGE_CHILDREN`` covers the worker
and its pool process. It prints one JSON object: each run's step statuses, errors and
the size of everything stored, and the peak RSS (kB) of this process and its children.
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

INPUT_BYTES = 64 * 1024
FANOUT = 8


def amplify_flow() -> dict[str, Any]:
    """Four transforms, each mapping its input eight times into a larger structure."""
    steps = []
    source = "$input.data"
    for number in range(1, 5):
        step_id = f"t{number}"
        mapping = {f"k{i}": source for i in range(FANOUT)}
        steps.append(
            {"id": step_id, "kind": "transform", "input_mapping": mapping, "expression": "@"}
        )
        source = f"$step.{step_id}"
    return {
        "name": "amplify",
        "inputs": {"data": {"type": "string"}},
        "steps": steps,
        "outputs": {"last": "$step.t4"},
    }


def bomb_flow() -> dict[str, Any]:
    return {
        "name": "bomb",
        "tools": ["bomb"],
        "steps": [{"id": "fetch", "kind": "tool", "tool": "bomb"}],
        "outputs": {"body": "$step.fetch"},
    }


BOMB_TOOL = """
- name: bomb
  kind: http
  description: A gzip body that inflates far past any cap (loopback fake).
  base_url: "{base}"
  request: {{method: GET, url: /bomb}}
  inputs: {{type: object, properties: {{}}}}
  timeout: 60
"""


def _setup(base: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    if settings.DATABASES["default"]["ENGINE"].endswith("sqlite3"):
        call_command("migrate", verbosity=0)
    from tools.loader import load_tool_text
    from tools.services import tool_upsert

    for spec in load_tool_text(BOMB_TOOL.format(base=base), source="memory_probe"):
        tool_upsert(spec=spec, source="memory_probe")


def _runs() -> list[Any]:
    from runs.services import run_create
    from workflows.services import workflow_import

    created = []
    for flow, inputs in ((amplify_flow(), {"data": "x" * INPUT_BYTES}), (bomb_flow(), {})):
        workflow, _ = workflow_import(data=flow)
        created.append(run_create(workflow=workflow, trigger="api", inputs=inputs))
    return created


def _local(runs: list[Any]) -> None:
    from runs.services import run_execute

    for run in runs:
        run_execute(run=run)


def _celery(runs: list[Any]) -> None:
    from runs.services import run_enqueue
    from tests.celery_support import CeleryCluster

    cluster = CeleryCluster(
        log_dir=Path(os.environ["PROBE_LOG_DIR"]),
        env=dict(os.environ),
        queue=os.environ["CELERY_TASK_DEFAULT_QUEUE"],
    )
    cluster.start_worker("probe", concurrency=1)
    try:
        for run in runs:
            run_enqueue(run=run)
        deadline = time.monotonic() + 120
        while not all(_settled(run) for run in runs):
            if time.monotonic() > deadline:
                raise SystemExit(f"the runs did not finish:\n{cluster.logs()}")
            time.sleep(0.2)
    finally:
        cluster.stop_all()


def _settled(run: Any) -> bool:
    run.refresh_from_db()
    moving = run.step_results.filter(status__in=["queued", "running"]).exists()
    return run.status in {"succeeded", "failed", "cancelled"} and not moving


def _stored_bytes(value: Any) -> int:
    return 0 if value is None else len(json.dumps(value, ensure_ascii=False))


def _report(run: Any) -> dict[str, Any]:
    run.refresh_from_db()
    steps = {}
    for row in run.step_results.order_by("step_id"):
        steps[row.step_id] = {
            "status": row.status,
            "error": row.error,
            "stored": _stored_bytes(row.inputs) + _stored_bytes(row.output),
            "attempt_log": _stored_bytes(row.attempt_log),
        }
    return {"status": run.status, "outputs": _stored_bytes(run.outputs), "steps": steps}


def main() -> None:
    mode, base = sys.argv[1], sys.argv[2]
    _setup(base)
    runs = _runs()
    (_local if mode == "local" else _celery)(runs)
    report = {
        "runs": [_report(run) for run in runs],
        "self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
        "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
    }
    print("PROBE " + json.dumps(report))


if __name__ == "__main__":
    main()
