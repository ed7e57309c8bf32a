"""`runflow --dry-run`: the plan of a run, without a call or a stored row.

Levels in execution order; per step its kind and tool, the inputs known before the
run (run inputs and literals, resolved) and the references it will read; the
branches of decisions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from runs.engine.kinds import KINDS
from tools.paths import get
from workflows.graph import FlowGraph
from workflows.references import EnvRef, InputRef, ItemRef, Literal, StepRef, parse_value
from workflows.schema import AnyStep, WorkflowSpec


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 120 else text[:117] + "..."


def _describe(parsed: Any, inputs: Mapping[str, Any]) -> str:
    """A known value as JSON, or the reference it will read."""
    if isinstance(parsed, Literal):
        return _show(parsed.value)
    if isinstance(parsed, InputRef):
        return f"{_show(get(inputs.get(parsed.name), parsed.path))}  ({parsed})"
    if isinstance(parsed, EnvRef):
        return f"<{parsed}>"  # never the value
    if isinstance(parsed, StepRef | ItemRef):
        return f"<- {parsed}"
    if isinstance(parsed, dict):
        return "{" + ", ".join(f"{k}: {_describe(v, inputs)}" for k, v in parsed.items()) + "}"
    if isinstance(parsed, list):
        return "[" + ", ".join(_describe(v, inputs) for v in parsed) + "]"
    return repr(parsed)


def _known(parsed: Any, inputs: Mapping[str, Any]) -> Any:
    """A value known before the run, or a placeholder naming what it will read."""
    if isinstance(parsed, Literal):
        return parsed.value
    if isinstance(parsed, InputRef):
        return get(inputs.get(parsed.name), parsed.path)
    if isinstance(parsed, EnvRef | StepRef | ItemRef):
        return f"<{parsed}>"  # an env value is never shown
    if isinstance(parsed, dict):
        return {k: _known(v, inputs) for k, v in parsed.items()}
    if isinstance(parsed, list):
        return [_known(v, inputs) for v in parsed]
    return repr(parsed)


class _Describer:
    """The dry run's ``Describe`` (``runs.engine.kinds.base``) over the run's inputs."""

    def __init__(self, inputs: Mapping[str, Any], step_ids: frozenset[str]) -> None:
        self.inputs = inputs
        self.step_ids = step_ids

    def __call__(self, value: Any) -> str:
        return _describe(parse_value(value, self.step_ids), self.inputs)

    def known(self, value: Any) -> Any:
        return _known(parse_value(value, self.step_ids), self.inputs)


def _kind_line(step: AnyStep, graph: FlowGraph) -> str:
    line = f"    {step.id:<22} {step.kind}"
    for tool in step.direct_tools():
        line += f" {tool}"
    parents = graph.parents[step.id]
    if parents:
        line += "   after: " + ", ".join(parents)
    if step.on_error == "continue":
        line += "   (on_error: continue)"
    return line


def _step_lines(
    step: AnyStep, graph: FlowGraph, inputs: Mapping[str, Any], step_ids: frozenset[str]
) -> list[str]:
    lines = [_kind_line(step, graph)]
    for name, value in step.input_mapping.items():
        lines.append(f"        {name} = {_describe(parse_value(value, step_ids), inputs)}")
    lines += KINDS[step.kind].plan(step, graph, _Describer(inputs, step_ids))
    return lines


def plan_lines(spec: WorkflowSpec, graph: FlowGraph, inputs: Mapping[str, Any]) -> list[str]:
    step_ids = frozenset(graph.step_ids)
    lines = [
        f"dry run of {spec.name}: {_count(len(spec.steps), 'step')} in "
        f"{_count(len(graph.levels), 'level')} "
        "(no calls made, no run stored)",
    ]
    if inputs:
        lines.append("inputs: " + ", ".join(f"{k}={_show(v)}" for k, v in inputs.items()))
    if spec.max_parallel is not None:
        lines.append(f"max_parallel: at most {_count(spec.max_parallel, 'step')} at once")
    if spec.queue:
        lines.append(f"queue: {spec.queue} (on the Celery workers; a tool's own queue wins)")
    for number, level in enumerate(graph.levels, start=1):
        parallel = " (in parallel)" if len(level) > 1 else ""
        lines.append(f"  level {number}{parallel}")
        for step_id in level:
            lines.extend(_step_lines(spec.step(step_id), graph, inputs, step_ids))
    if spec.outputs:
        lines.append("outputs: " + ", ".join(f"{k} <- {v}" for k, v in spec.outputs.items()))
    return lines
