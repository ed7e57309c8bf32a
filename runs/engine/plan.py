"""A workflow version compiled for running: what every run of it shares, built once.

A ``CompiledPlan`` holds the frozen spec, its graph, the readiness plan (child
lists, Kahn positions), every step's parsed input mapping (and foreach item
mapping) and the expressions the step kinds compile. All of it depends only on the
definition, so ``runs.engine.caches`` keeps one per definition per process, and each
run builds its own per-run objects (``RunContext``, ``Readiness``) from it.

Nothing in a plan is changed after it is built: its tables are read-only views, and
the parsed mappings (plain dicts, which the resolver walks) are only read (a step
receives a deep copy of its arguments, ``runs.engine.attempt``), so runs sharing a
plan never see each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from runs.engine.kinds import KINDS
from runs.engine.readiness import ReadyPlan
from workflows.graph import FlowGraph, build_graph
from workflows.references import parse_value
from workflows.schema import WorkflowSpec


@dataclass(frozen=True)
class CompiledPlan:
    spec: WorkflowSpec
    graph: FlowGraph
    ready: ReadyPlan
    parsed: Mapping[str, Mapping[str, Any]]  # step id -> parsed input mapping
    parsed_items: Mapping[str, Mapping[str, Any]]  # foreach step id -> parsed item mapping
    compiled: Mapping[tuple[str, str], Any]  # (step id, key) -> what the step's kind compiled
    allowed_tools: frozenset[str]
    needs_llm: bool  # a step needs the run's default LLM client (no named endpoint)
    calls_models: bool = False  # a step calls a model, on any endpoint (its ledger: spend)
    # Filled on first use (``definition_hash``): tracing names the version by it.
    memo: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    def definition_hash(self) -> str:
        """The spec's hash, made once per compiled definition (about 1 ms for 100 steps),
        only when asked: a traced run's spans name their version by it."""
        found = self.memo.get("definition_hash")
        if found is None:
            found = self.memo["definition_hash"] = self.spec.definition_hash()
        return found


def compile_plan(spec: WorkflowSpec) -> CompiledPlan:
    """Compile ``spec`` (raises ``GraphError`` or ``ReferenceError_`` on a bad one)."""
    step_ids = frozenset(s.id for s in spec.steps)
    graph = build_graph(spec)
    return CompiledPlan(
        spec=spec,
        graph=graph,
        ready=ReadyPlan.of(graph),
        parsed=MappingProxyType(
            {s.id: _parse_mapping(s.input_mapping, step_ids) for s in spec.steps}
        ),
        parsed_items=MappingProxyType(
            {
                s.id: _parse_mapping(items, step_ids)
                for s in spec.steps
                if (items := s.mappings().get("item_mapping")) is not None
            }
        ),
        compiled=MappingProxyType(compile_expressions(spec)),
        allowed_tools=spec.allowlist(),
        needs_llm=any(s.needs_llm() and not s.llm_endpoint() for s in spec.steps),
        calls_models=any(s.needs_llm() for s in spec.steps),
    )


def _parse_mapping(mapping: Mapping[str, Any], step_ids: frozenset[str]) -> dict[str, Any]:
    # A plain dict (the resolver walks dicts and lists), only ever read.
    return {name: parse_value(value, step_ids) for name, value in mapping.items()}


def compile_expressions(spec: WorkflowSpec) -> dict[tuple[str, str], Any]:
    """What each step's kind compiles once (decision conditions, transform expressions),
    by ``(step id, key)``."""
    return {
        (step.id, key): compiled
        for step in spec.steps
        for key, compiled in KINDS[step.kind].compile(step).items()
    }
