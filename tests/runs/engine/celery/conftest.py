"""Helpers of the Celery driver's in-process tests (``runs.engine.celery``).

A ``Bus`` (``tests.celery_support``) stands in for the broker: it records what the
services publish and delivers it to ``step_execute`` the way a worker would. The
``echo_api`` fixture (the tools' loopback server) is in ``tests/runs/engine/conftest.py``.
"""

from __future__ import annotations

from runs.engine.celery.run import run_start
from runs.models import Run, StepResult
from runs.services import run_create
from tests.celery_support import Bus, import_flow

WORKER = "w-test@local"


def started(data: dict, tag: str = "alpha") -> tuple[Run, Bus]:
    bus = Bus()
    run = run_create(workflow=import_flow(data), trigger="api", inputs={"tag": tag})
    run_start(run=run, publish=bus)
    return run, bus


def results(run: Run) -> dict[str, StepResult]:
    return {r.step_id: r for r in run.step_results.order_by("step_id")}


def by_id(run: Run) -> dict[int, str]:
    return dict(run.step_results.values_list("pk", "step_id"))


def chain_flow(name: str, n: int, **step: object) -> dict:
    ids = [f"c{i}" for i in range(1, n + 1)]
    steps = [
        {
            "id": sid,
            "kind": "tool",
            "tool": "echo",
            "input_mapping": {
                "tag": "$input.tag" if i == 0 else f"{ids[i - 1]}.tag",
                "name": sid,
                "delay": 0,
            },
            **step,
        }
        for i, sid in enumerate(ids)
    ]
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}},
        "steps": steps,
        "outputs": {"last": f"{ids[-1]}.name", "tag": f"{ids[-1]}.tag"},
    }


def spread_flow(name: str) -> dict:
    """``root``, then ``leaf1``…``leaf3`` reading it."""
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {
                "id": "root",
                "kind": "tool",
                "tool": "echo",
                "input_mapping": {"tag": "$input.tag", "name": "root", "delay": 0},
            },
            *(
                {
                    "id": f"leaf{i}",
                    "kind": "tool",
                    "tool": "echo",
                    "input_mapping": {"tag": "root.tag", "name": f"leaf{i}", "delay": 0},
                }
                for i in range(1, 4)
            ),
        ],
    }
