"""`foreach` steps: one tool call per item of the mapped list ``items``.

Parameters mapped in ``input_mapping`` (other than ``items``) go to every call;
``item_mapping`` gives per-item parameters from ``$item``, ``$item.path``,
``$index``, run inputs and upstream outputs (``resolve_step_call`` resolves them).
At most ``items_in_flight`` calls are in flight (the step's ``max_parallel``, else its
older ``concurrency``), on either driver: the step is one task, and its items share this
pool; each item retries under the step's
(else the tool's) policy, with the waits every step has (``runs.engine.tries``).
The output keeps input order:
``{"items": [result or null, …], "count": N, "errors": [{"index", "error"}, …]}``.
With ``on_error: continue`` failed items are collected in ``errors``; otherwise
any failed item fails the step.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from runs.engine.context import RunContext
from runs.engine.http import tool_session
from runs.engine.kinds.base import Attempt, Describe, StepKind, call_tool, check_allowed
from runs.engine.resolve import EACH_KEY, MAX_ITEMS
from runs.engine.tries import try_until_done
from tools.errors import FlowpilotError, ToolInputError
from tools.policy import RetryPolicy
from tools.sizes import OutputTooLarge
from workflows.graph import FlowGraph
from workflows.schema import ForeachStep


class ForeachItemsFailed(FlowpilotError):
    code = "foreach_items_failed"


def item_policy(ctx: RunContext, step: ForeachStep) -> RetryPolicy:
    if step.retry is not None:
        return step.retry
    spec = ctx.registry.get(step.tool)
    return spec.retry if spec is not None and spec.retry is not None else RetryPolicy()


def _call_item(
    ctx: RunContext, step: ForeachStep, args: dict[str, Any], policy: RetryPolicy, index: int
) -> Any:
    """One item's call, tried like any step (``tries.try_until_done``: the same waits
    for a 429's ``Retry-After`` and an open breaker's cool-down); raises its last error."""
    with tool_session(ctx.http, ctx.registry, step.tool) as http:  # cookies: one item
        _, last = try_until_done(
            ctx, policy, lambda: call_tool(ctx, step, step.tool, args, item=index, http=http)
        )
    if last.error is not None:
        raise last.error
    return None if last.value is None else last.value.output


def execute_foreach_step(ctx: RunContext, step: ForeachStep, args: dict[str, Any]) -> Attempt:
    items = args.get("items")
    each = args.get(EACH_KEY)
    if not isinstance(items, list) or each is None:
        raise ToolInputError(
            f"step `{step.id}`: `items` must be a list, got {type(items).__name__}"
        )
    if len(items) > MAX_ITEMS:
        raise ToolInputError(f"step `{step.id}`: {len(items)} items is over the {MAX_ITEMS} limit")
    check_allowed(ctx, step, step.tool)  # once for the step, not once per item
    shared = {k: v for k, v in args.items() if k not in {"items", EACH_KEY}}
    policy = item_policy(ctx, step)

    def one(index: int) -> tuple[Any, dict | None]:
        try:
            return _call_item(ctx, step, {**shared, **each[index]}, policy, index), None
        except OutputTooLarge as exc:  # a tool does not know which step called it
            return None, ctx.redactor.scrub(exc.for_step(step.id).as_dict())
        except FlowpilotError as exc:
            return None, ctx.redactor.scrub(exc.as_dict())

    bound = step.items_in_flight
    with ThreadPoolExecutor(max_workers=bound, thread_name_prefix=step.id) as pool:
        outcomes = list(pool.map(one, range(len(items))))
    errors: list[dict[str, Any]] = [
        {"index": i, "error": err} for i, (_, err) in enumerate(outcomes) if err
    ]
    if errors and step.on_error != "continue":
        first = errors[0]
        raise ForeachItemsFailed(
            f"step `{step.id}`: {len(errors)} of {len(items)} items failed; first, item "
            f"{first['index']}: {first['error']['type']}: {first['error']['message']}"
        )
    results = [result for result, _ in outcomes]
    return Attempt(output={"items": results, "count": len(results), "errors": errors})


def plan_foreach_step(step: ForeachStep, graph: FlowGraph, describe: Describe) -> list[str]:
    """The per-item mapping, after the shared one."""
    lines = [f"        per item ({step.items_in_flight} at a time):"]
    lines += [f"          {name} = {describe(value)}" for name, value in step.item_mapping.items()]
    return lines


KIND = StepKind(model=ForeachStep, execute=execute_foreach_step, plan=plan_foreach_step)
