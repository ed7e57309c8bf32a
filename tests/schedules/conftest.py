"""A tool-free workflow to schedule, and a stand-in for the task that starts a fire's run."""

import random
from dataclasses import dataclass, field

import pytest

QUICK_FLOW = {
    "name": "nightly",
    "inputs": {"n": {"type": "integer", "default": 1}},
    "steps": [
        {"id": "double", "kind": "transform", "expression": "n", "input_mapping": {"n": "$input.n"}}
    ],
}


@pytest.fixture
def active_flow():
    from workflows.services import workflow_activate_trusted, workflow_import

    workflow, _ = workflow_import(data=QUICK_FLOW)
    return workflow_activate_trusted(workflow=workflow)


@dataclass
class Starts:
    """Records ``start(run_id, delay)`` calls instead of queuing the task."""

    calls: list = field(default_factory=list)

    def __call__(self, run_id: int, delay: float) -> None:
        self.calls.append((run_id, delay))


@pytest.fixture
def starts():
    return Starts()


@pytest.fixture
def rng():
    return random.Random(7)
