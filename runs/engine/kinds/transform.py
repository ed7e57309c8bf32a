"""`transform` steps: a JMESPath expression over the mapped values; no side effects."""

from __future__ import annotations

from typing import Any

from runs.engine.context import RunContext
from runs.engine.kinds.base import Attempt, Describe, StepKind
from workflows.graph import FlowGraph
from workflows.schema import TransformStep
from workflows.transform import DEFAULT_SECONDS, compile_transform


def execute_transform_step(ctx: RunContext, step: TransformStep, args: dict[str, Any]) -> Attempt:
    """Search the mapped values, bounded by the step's size cap and its timeout (else
    ``workflows.transform.DEFAULT_SECONDS``): an amplifying expression fails fast."""
    compiled = ctx.compiled[(step.id, "expression")]
    cap = ctx.limits.step_output_cap(step.max_output_bytes)
    seconds = step.timeout or DEFAULT_SECONDS
    return Attempt(output=compiled.apply(args, max_bytes=cap, seconds=seconds))


def compile_transform_step(step: TransformStep) -> dict[str, Any]:
    return {"expression": compile_transform(step.expression)}


def plan_transform_step(step: TransformStep, graph: FlowGraph, describe: Describe) -> list[str]:
    return [f"        expression: {step.expression}"]


KIND = StepKind(
    model=TransformStep,
    execute=execute_transform_step,
    compile=compile_transform_step,
    plan=plan_transform_step,
)
