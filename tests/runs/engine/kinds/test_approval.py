"""runs.engine.kinds.approval: a try records one request and waits; a replay answers
from the validation run's recorded decision; the dry run says who decides."""

from __future__ import annotations

import pytest

from runs.dryrun import plan_lines
from runs.engine.kinds.approval import ApprovalRejected, _recorded
from runs.models import ApprovalRequest, StepResult
from tests.factories import RunFactory
from workflows.graph import build_graph
from workflows.schema import WorkflowSpec

pytestmark = pytest.mark.django_db

SPEC = WorkflowSpec.model_validate(
    {
        "name": "w",
        "steps": [
            {
                "id": "confirm",
                "kind": "approval",
                "approvers": ["group:finance"],
                "required": 2,
                "timeout": 600,
                "on_timeout": "continue",
                "form": {"type": "object", "properties": {"n": {"type": "integer", "default": 3}}},
            }
        ],
    }
)
STEP = SPEC.steps[0]


def recorded(status: str, **fields) -> int:
    run = RunFactory(trigger="validation")
    step = StepResult.objects.create(run=run, step_id="confirm", status="succeeded")
    ApprovalRequest.objects.create(
        run=run, step_result=step, step_id="confirm", status=status, **fields
    )
    return run.pk


def test_a_replay_answers_with_the_recorded_decision():
    assert _recorded(STEP, recorded("approved", output={"n": 7})).output == {"n": 7}
    assert _recorded(STEP, recorded("timed_out")).output == {"n": 3}  # continue: defaults
    with pytest.raises(ApprovalRejected, match="rejected by bob"):
        _recorded(STEP, recorded("rejected", message="rejected by bob"))
    with pytest.raises(ApprovalRejected, match="recorded no decision"):
        _recorded(STEP, recorded("pending"))


def test_the_dry_run_says_who_decides_and_what_happens_when_the_time_is_up():
    text = "\n".join(plan_lines(SPEC, build_graph(SPEC), {}))
    assert "waits for 2 approval(s) of group:finance" in text
    assert "after 600 s without a decision: continue" in text
