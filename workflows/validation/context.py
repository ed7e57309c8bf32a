"""The spec parsed once for all checks: mapping leaves with their paths, tool look-ups.

The validator depends only on this small protocol of a tool registry, which
``tools.registry.ToolRegistry`` satisfies: ``get(name)`` returns ``None`` or a
spec with ``name``, ``input_schema`` (JSON Schema) and ``outputs`` (declared
output field names; empty means undeclared, any path allowed), and optionally
``output_type(field)`` (the JSON Schema of an output field, or ``None``). With no
registry (``None``) the tool-dependent checks are skipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

from workflows.graph import iter_leaves, parse_leniently, step_mappings
from workflows.schema import WorkflowSpec
from workflows.validation.report import format_path
from workflows.validation.subworkflows import WorkflowLookup, child_output_fields

# The ``error`` an ``on_error: continue`` step outputs: null, or the record of its last
# try's error (``FlowpilotError.as_dict``: an HTTP error adds ``status``, others more).
ERROR_RECORD_SCHEMA: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {
        "type": {"type": "string"},
        "message": {"type": "string"},
        "retryable": {"type": "boolean"},
        "status": {"type": ["integer", "null"]},
    },
}


class ToolSpecLike(Protocol):
    """What the validator reads of a tool (read only: a frozen ``ToolSpec`` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def input_schema(self) -> dict[str, Any]: ...

    @property
    def outputs(self) -> list[str]: ...


class ToolLookup(Protocol):
    def get(self, name: str) -> ToolSpecLike | None: ...


class Leaf(NamedTuple):
    """One leaf of a mapping: a reference, a literal or a ``BadReference``."""

    path: str  # steps[2].input_mapping.lat, outputs.temperature
    value: Any
    where: str  # "input_mapping", "item_mapping" or "outputs"
    step_index: int | None = None  # None for the workflow outputs


@dataclass
class FlowContext:
    spec: WorkflowSpec
    registry: ToolLookup | None
    step_ids: frozenset[str]
    first_index: dict[str, int]  # step id -> index of its first occurrence
    parsed: list[dict[str, dict[str, Any]]]  # per step: mapping field -> param -> parsed
    step_leaves: list[list[Leaf]]  # per step
    output_leaves: list[Leaf]
    workflows: WorkflowLookup | None = None  # the workflows `workflow` steps run
    credentials: Any = None  # the stored credentials' names (validation.credentials)
    _tools: dict[str, Any] = field(default_factory=dict)
    _labels: dict[str, set[str]] | None = None

    @classmethod
    def build(
        cls,
        spec: WorkflowSpec,
        registry: ToolLookup | None,
        workflows: WorkflowLookup | None = None,
        credentials: Any = None,
    ) -> FlowContext:
        ids = frozenset(step.id for step in spec.steps)
        first_index: dict[str, int] = {}
        parsed, step_leaves = [], []
        for index, step in enumerate(spec.steps):
            first_index.setdefault(step.id, index)
            fields = {
                name: {param: parse_leniently(value, ids) for param, value in mapping.items()}
                for name, mapping in step_mappings(step).items()
            }
            parsed.append(fields)
            step_leaves.append(
                [
                    Leaf(format_path(path, f"steps[{index}].{name}"), leaf, name, index)
                    for name, mapping in fields.items()
                    for path, leaf in iter_leaves(mapping)
                ]
            )
        outputs = {name: parse_leniently(value, ids) for name, value in spec.outputs.items()}
        output_leaves = [
            Leaf(format_path(("outputs", *path)), leaf, "outputs")
            for path, leaf in iter_leaves(outputs)
        ]
        return cls(
            spec, registry, ids, first_index, parsed, step_leaves, output_leaves, workflows,
            credentials,
        )  # fmt: skip

    def step(self, step_id: str) -> Any:
        """The first step with this id, or ``None``."""
        index = self.first_index.get(step_id)
        return None if index is None else self.spec.steps[index]

    def step_path(self, index: int) -> str:
        return f"steps[{index}]"

    def leaves(self) -> Iterator[Leaf]:
        for leaves in self.step_leaves:
            yield from leaves
        yield from self.output_leaves

    def tool(self, name: str) -> ToolSpecLike | None:
        """Registry look-up, cached for this validation."""
        if name not in self._tools:
            self._tools[name] = None if self.registry is None else self.registry.get(name)
        return self._tools[name]

    def edge_labels(self, step_id: str) -> set[str]:
        """The ``when`` labels of the explicit edges leaving ``step_id``."""
        if self._labels is None:
            self._labels = {}
            for edge in self.spec.edges:
                if edge.when is not None:
                    self._labels.setdefault(edge.from_, set()).add(edge.when)
        return self._labels.get(step_id, set())

    def output_fields(self, step: Any) -> tuple[str, ...] | None:
        """The declared top-level fields of a step's output; ``None`` when any may be read
        (a tool that declares no outputs, a transform whose shape is known only at run time).
        """
        child = step.called_workflow()
        if child is not None and step.output_fields() is None:
            found = None if self.workflows is None else self.workflows.get(child)
            return None if found is None else child_output_fields(found)
        name = step.output_tool()
        if name is None:
            return step.output_fields()
        tool = self.tool(name)
        return tuple(tool.outputs) if tool is not None and tool.outputs else None

    def output_field_schema(self, step: Any, field: str) -> dict[str, Any] | None:
        """The JSON Schema of one top-level field of a step's output, when known: what
        the step declares (an llm ``result``, a transform's inferred keys, a foreach's
        ``count``), else its tool's output type (``output_type(field)``, when the tool
        has it), a foreach's ``items`` being the list of its tool's typed results; the
        ``error`` of an ``on_error: continue`` step is its error record (or null)."""
        own = step.output_field_schema(field)
        if field == "error" and own is None and step.on_error == "continue":
            return ERROR_RECORD_SCHEMA
        name = step.output_tool() or (step.direct_tools() or (None,))[0]
        tool = None if name is None else self.tool(name)
        typed = getattr(tool, "output_type", None)
        if step.retries_per_item and field == "items":  # a foreach: one result per item
            properties = {f: typed(f) for f in getattr(tool, "outputs", ())} if typed else {}
            known = {f: s for f, s in properties.items() if s is not None}
            if not known:
                return own
            shape = {"type": ["object", "null"], "properties": known}
            return {**(own or {"type": "array"}), "items": shape}
        if own is not None or step.output_tool() is None or not callable(typed):
            return own
        found = typed(field)
        return found if isinstance(found, dict) else None

    def tool_names(self) -> list[str]:
        """Every registered tool name (sorted), when the registry can list them."""
        names = getattr(self.registry, "names", None)
        return sorted(names()) if callable(names) else []

    def allowed_tools(self) -> frozenset[str]:
        """The flow allowlist; when omitted, every tool its steps name (llm tools included)."""
        return self.spec.allowlist()
