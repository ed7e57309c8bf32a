"""Resolving a step's parsed input mapping into values; a step sees only what it maps.

A step sees exactly the values its mapping names. Each resolution gives two
things: the values the call receives, and the record stored in the checkpoint,
where ``$env`` references keep their *name* (never the value) and every other
value is scrubbed of secrets. The values themselves are never scrubbed: a step
receives exactly what it maps.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from runs.engine.context import RunContext
from runs.state import StepStatus
from tools.errors import ToolInputError
from tools.paths import get
from tools.redaction import Redactor
from tools.sizes import check_size
from workflows.references import EnvRef, InputRef, ItemRef, Literal, StepRef
from workflows.schema import AnyStep

StepView = Callable[[str], Any]


def step_view_value(status: str, output: Any, error: Any) -> Any:
    """What ``STEP_ID.path`` reads: the output, or ``{"error": …}`` for a failed step.

    A skipped or unfinished step reads as null.
    """
    if status == StepStatus.SUCCEEDED:
        return output
    if status == StepStatus.FAILED:
        return {"error": error}
    return None


def resolve(
    parsed: Any,
    *,
    inputs: Mapping[str, Any],
    step_value: StepView,
    env: Mapping[str, str],
    redactor: Redactor,
    item: Any = None,
    index: int | None = None,
    record: bool = True,
) -> tuple[Any, Any]:
    """Return ``(value, record)`` for one parsed mapping value (``record=False``: the
    record is None, and nothing is scrubbed — the values alone, to measure them)."""
    if isinstance(parsed, dict | list):
        keys = parsed.keys() if isinstance(parsed, dict) else range(len(parsed))
        pairs = {
            k: resolve(parsed[k], inputs=inputs, step_value=step_value, env=env,
                       redactor=redactor, item=item, index=index, record=record)
            for k in keys
        }  # fmt: skip
        if isinstance(parsed, dict):
            return {k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()}
        return [p[0] for p in pairs.values()], [p[1] for p in pairs.values()]
    if isinstance(parsed, Literal):
        return parsed.value, redactor.scrub(parsed.value) if record else None
    if isinstance(parsed, EnvRef):
        return env.get(parsed.name), str(parsed)  # recorded by name, whatever it holds
    if isinstance(parsed, InputRef):
        value: Any = get(inputs.get(parsed.name), parsed.path)
    elif isinstance(parsed, StepRef):
        value = get(step_value(parsed.step_id), parsed.path)
    elif isinstance(parsed, ItemRef):
        value = index if parsed.index else get(item, parsed.path)
    else:  # pragma: no cover - the parser returns only the kinds above
        raise TypeError(f"unexpected parsed value {parsed!r}")
    return value, redactor.scrub(value) if record else None


def resolve_mapping(
    mapping: Mapping[str, Any],
    *,
    inputs: Mapping[str, Any],
    step_value: StepView,
    env: Mapping[str, str],
    redactor: Redactor,
    recorded: bool = True,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Resolve every parameter. One that resolves to null (an unset optional input, a
    skipped step's output) is left out of the call, as if unmapped, and recorded as null.
    """
    values: dict[str, Any] = {}
    record: dict[str, Any] = {}
    for name, parsed in mapping.items():
        value, record[name] = resolve(
            parsed, inputs=inputs, step_value=step_value, env=env, redactor=redactor,
            record=recorded,
        )  # fmt: skip
        if value is not None:
            values[name] = value
    return values, record


def record_of(parsed: Any, value: Any, redactor: Redactor) -> Any:
    """The checkpoint record of ``value``, which ``parsed`` resolved to: what
    ``resolve(parsed, …)`` records, without resolving again (every leaf scrubbed, an
    ``$env`` reference by its name)."""
    if isinstance(parsed, dict):
        return {k: record_of(p, value[k], redactor) for k, p in parsed.items()}
    if isinstance(parsed, list):
        return [record_of(p, v, redactor) for p, v in zip(parsed, value, strict=True)]
    if isinstance(parsed, EnvRef):
        return str(parsed)
    return redactor.scrub(value)


EACH_KEY = "$each"  # per-item arguments of a foreach step (parameter names never start with $)
# The results a step kept from an earlier try or run (``StepKind.carry``): a foreach's
# succeeded items, which it does not call again.
DONE_KEY = "$done"


def resolve_step_call(
    ctx: RunContext, step: AnyStep, *, inputs: Mapping[str, Any], step_value: StepView
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The arguments of one step, and their checkpoint record. Every driver uses this.

    For a ``foreach`` step the per-item arguments (``item_mapping`` resolved for each
    item of ``items``, which may read ``$item``, ``$index``, run inputs and upstream
    outputs) travel under ``EACH_KEY``; the record keeps the first few of them.

    The arguments are measured (``tools.sizes``) before any record or copy of them is
    made: mapping one value eight times gives eight references to it, cheap to hold
    but eight copies once copied, so arguments over the step's cap are refused first
    (``OutputTooLarge``), and nothing of them is recorded.
    """
    common: dict[str, Any] = {
        "inputs": inputs,
        "step_value": step_value,
        "env": ctx.env,
        "redactor": ctx.redactor,
    }
    cap = ctx.limits.step_output_cap(step.max_output_bytes)
    mapping = ctx.parsed[step.id]
    resolved = {
        name: resolve(parsed, **common, record=False)[0] for name, parsed in mapping.items()
    }
    # Unmapped, as resolve_mapping leaves them: parameters that resolved to null.
    values = {name: value for name, value in resolved.items() if value is not None}
    check_size(values, cap=cap, step=step.id, what="arguments")
    # The record from the values just resolved (resolving again would give the same).
    record = {
        name: record_of(parsed, resolved[name], ctx.redactor) for name, parsed in mapping.items()
    }
    args = dict(values)
    if step.id not in ctx.parsed_items or not isinstance(args.get("items"), list):
        return args, record
    _check_count(step.id, args["items"])
    each = [
        resolve(ctx.parsed_items[step.id], item=item, index=index, **common, record=False)[0]
        for index, item in enumerate(args["items"])
    ]
    check_size([values, each], cap=cap, step=step.id, what="arguments with the items'")
    # A per-item argument that resolves to null is left out too, like a shared one.
    args[EACH_KEY] = [{k: v for k, v in values.items() if v is not None} for values in each]
    record["items"] = f"<{len(each)} items>"
    record["per_item (first 3)"] = [
        resolve(ctx.parsed_items[step.id], item=item, index=index, **common)[1]
        for index, item in enumerate(args["items"][:3])
    ]
    return args, record


MAX_ITEMS = 10_000  # the most items one `foreach` step takes


def _check_count(step_id: str, items: list[Any]) -> None:
    """A `foreach` list is bounded by count (here, before its items' arguments are
    built) and by size (with the step's arguments)."""
    if len(items) > MAX_ITEMS:
        raise ToolInputError(f"step `{step_id}`: {len(items)} items is over the {MAX_ITEMS} limit")
