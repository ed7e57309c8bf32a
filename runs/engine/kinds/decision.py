"""`decision` steps (deterministic form): the first branch whose condition holds.

Conditions are compiled once per run (``RunContext.compiled``) from the safe
expression language in ``workflows.expressions``; nothing is evaluated as Python.
The LLM form (``decision_prompt``) is ``runs.engine.kinds.llm.execute_llm_decision``.
"""

from __future__ import annotations

from typing import Any

from runs.engine.kinds.base import Attempt
from runs.engine.kinds.llm import execute_llm_decision
from tools.errors import FlowpilotError


class NoBranchMatched(FlowpilotError):
    code = "no_branch_matched"


def execute_decision_step(ctx, step, args: dict[str, Any]) -> Attempt:
    if step.decision_prompt:
        return execute_llm_decision(ctx, step, args)
    for label in step.branches:
        condition = ctx.compiled.get((step.id, label))
        if condition is not None and condition.evaluate(args):
            return Attempt(output={"branch": label, "condition": condition.source}, branch=label)
    if step.default:
        return Attempt(output={"branch": step.default, "condition": None}, branch=step.default)
    raise NoBranchMatched(
        f"step `{step.id}`: no condition held and there is no default branch "
        f"(branches: {', '.join(step.branches)})"
    )
