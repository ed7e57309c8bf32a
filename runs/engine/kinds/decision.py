"""`decision` steps (deterministic form): the first branch whose condition holds.

Conditions are compiled once per run (``RunContext.compiled``) from the safe
expression language in ``workflows.expressions``; nothing is evaluated as Python.
The LLM form (``decision_prompt``) is ``runs.engine.kinds.llm.execute_llm_decision``.
"""

from __future__ import annotations

from typing import Any

from runs.engine.context import RunContext
from runs.engine.kinds.base import Attempt, Describe, StepKind
from runs.engine.kinds.llm import execute_llm_decision, model_line, prompt_lines
from tools.errors import FlowpilotError
from workflows.expressions import compile_condition
from workflows.graph import FlowGraph
from workflows.schema import DecisionStep


class NoBranchMatched(FlowpilotError):
    code = "no_branch_matched"


def execute_decision_step(ctx: RunContext, step: DecisionStep, args: dict[str, Any]) -> Attempt:
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


def compile_decision_step(step: DecisionStep) -> dict[str, Any]:
    """Each branch's condition, by label."""
    names = list(step.input_mapping)
    return {label: compile_condition(text, names=names) for label, text in step.conditions.items()}


def plan_decision_step(step: DecisionStep, graph: FlowGraph, describe: Describe) -> list[str]:
    """Each branch: its condition and the steps it leads to; for the LLM form, the
    model, the rendered question and the labels it must choose from."""
    lines = []
    if step.decision_prompt:
        lines.append(model_line(step))
        lines += prompt_lines("prompt", step.decision_prompt, step.input_mapping, describe)
        lines.append(f"        labels: {' | '.join(step.branches)}")
    for label in step.branches:
        targets = [e.target for e in graph.outgoing(step.id) if e.when == label]
        condition = step.conditions.get(label) or (
            "(default)" if step.default == label else "(no condition)"
        )
        lines.append(f"        branch {label}: {condition} -> {', '.join(targets) or '-'}")
    return lines


KIND = StepKind(
    model=DecisionStep,
    execute=execute_decision_step,
    compile=compile_decision_step,
    plan=plan_decision_step,
)
