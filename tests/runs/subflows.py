"""Flows and helpers of the sub-workflow tests (in process and on Celery workers).

``greet`` (the child) echoes a tag and a name; ``outer`` (the parent) runs ``greet``
as its step ``sub`` and reads the child's outputs downstream. They call the loopback
``echo`` tool of ``tests/celery_support.py``.
"""

from __future__ import annotations

from typing import Any

from review.services import workflow_approve
from workflows.models import Workflow, WorkflowStatus
from workflows.services import workflow_activate_trusted, workflow_import, workflow_transition


def child_flow(name: str = "greet", *, delay: float = 0.0, **changes: Any) -> dict:
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}, "name": {"type": "string", "default": "kid"}},
        "steps": [
            {
                "id": "say",
                "kind": "tool",
                "tool": "echo",
                "input_mapping": {"tag": "$input.tag", "name": "$input.name", "delay": delay},
            },
            {
                "id": "shout",
                "kind": "transform",
                "expression": "{loud: join('!', [tag, name])}",
                "input_mapping": {"tag": "say.tag", "name": "say.name"},
            },
        ],
        "outputs": {"tag": "say.tag", "loud": "shout.loud"},
        **changes,
    }


def parent_flow(name: str = "outer", child: str = "greet", **mapping: Any) -> dict:
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {
                "id": "sub",
                "kind": "workflow",
                "workflow": child,
                "input_mapping": mapping or {"tag": "$input.tag", "name": "ann"},
            },
            {
                "id": "after",
                "kind": "transform",
                "expression": "{said: loud}",
                "input_mapping": {"loud": "sub.loud"},
            },
        ],
        "outputs": {"said": "after.said", "tag": "sub.tag"},
    }


def caller_flow(name: str, child: str) -> dict:
    """A flow whose one step runs ``child`` with ``tag`` (for chains of calls)."""
    return {
        "name": name,
        "inputs": {"tag": {"type": "string"}},
        "steps": [
            {
                "id": "sub",
                "kind": "workflow",
                "workflow": child,
                "input_mapping": {"tag": "$input.tag"},
            }
        ],
        "outputs": {"tag": "sub.tag"},
    }


def activate(data: dict) -> Workflow:
    """Store a flow and make it active (an operator's trusted activation)."""
    workflow, _ = workflow_import(data=data)
    return workflow_activate_trusted(workflow=workflow)


def approve(data: dict, approver, inputs: dict[str, Any]) -> Workflow:
    """Store a flow and approve it: pins recorded, a validation run proves it."""
    workflow, _ = workflow_import(data=data)
    workflow_transition(workflow=workflow, to=WorkflowStatus.PENDING_REVIEW)
    approval = workflow_approve(version=workflow, approved_by=approver, sample_inputs=inputs)
    workflow.refresh_from_db()
    assert workflow.status == WorkflowStatus.ACTIVE, approval.validation_run.error_summary
    return workflow
