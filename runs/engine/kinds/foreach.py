"""`foreach` steps: one tool call per item of the mapped list ``items``.

Parameters mapped in ``input_mapping`` (other than ``items``) go to every call;
``item_mapping`` gives per-item parameters from ``$item``, ``$item.path``,
``$index``, run inputs and upstream outputs (``resolve_step_call`` resolves them).
At most ``items_in_flight`` calls are in flight (the step's ``max_parallel``, else its
older ``concurrency``), on either driver: the step is one task, and its items share this
pool; each item retries under the step's
(else the tool's) policy, with the waits every step has (``runs.engine.tries``).
The output keeps input order:
``{"items": [result or null, …], "count": N, "errors": [{"index", "item", "error"}, …]}``
(``items[i]`` is the result of input item ``i``; an error names its item's index and
the item itself). With ``on_error: continue`` failed items are collected in
``errors``; otherwise any failed item fails the step (``ForeachItemsFailed``), and the
same output is its ``progress``: the failed step's checkpoint keeps every succeeded
item's result.

Item-level restart: a step started again with its earlier progress
(``DONE_KEY``, see ``carry_progress``: a resume, or a restart of the step itself)
calls only the items that did not succeed, and puts the kept results in their places.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from runs.engine.context import RunContext
from runs.engine.http import tool_session
from runs.engine.kinds.base import (
    Attempt,
    Describe,
    StepFailedWithProgress,
    StepKind,
    call_tool,
    check_allowed,
)
from runs.engine.resolve import DONE_KEY, EACH_KEY, MAX_ITEMS
from runs.engine.tries import try_until_done
from tools.errors import FlowpilotError, ToolInputError
from tools.policy import RetryPolicy
from tools.sizes import OutputTooLarge
from workflows.graph import FlowGraph
from workflows.schema import ForeachStep


class ForeachItemsFailed(StepFailedWithProgress):
    code = "foreach_items_failed"


def _failed_items(progress: Any) -> tuple[list[Any], set[int]] | None:
    """The results and the failed indexes of a stored foreach output with failed items;
    None for anything else (a capped preview, an output whose every item succeeded)."""
    if not isinstance(progress, dict):
        return None
    done, count, errors = progress.get("items"), progress.get("count"), progress.get("errors")
    if not isinstance(done, list) or count != len(done) or not isinstance(errors, list):
        return None
    failed = {e["index"] for e in errors if isinstance(e, dict) and isinstance(e.get("index"), int)}
    return (done, failed) if failed else None


def foreach_progress(progress: Any) -> tuple[int, int] | None:
    """``(items that succeeded, items)`` of a stored output with failed items."""
    found = _failed_items(progress)
    if found is None:
        return None
    done, failed = found
    return len(done) - len(failed), len(done)


def carry_progress(step: ForeachStep, progress: Any, args: dict[str, Any]) -> dict[str, Any]:
    """``args`` with the results of the items that succeeded before (``progress``: the
    step's stored output, from a failed try or a restarted run) under ``DONE_KEY``: a
    list in item order, ``[result]`` for an item done, null for one to call.

    Nothing is carried when the progress is not a foreach output with failed items and
    as many items as ``items`` now (a capped preview, another list, an output whose
    every item succeeded): every item is called.
    """
    items = args.get("items")
    found = _failed_items(progress)
    if not isinstance(items, list) or found is None or len(found[0]) != len(items):
        return args
    done, failed = found
    carried = [None if i in failed else [done[i]] for i in range(len(items))]
    return {**args, DONE_KEY: carried}


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
            ctx,
            policy,
            lambda: call_tool(ctx, step, step.tool, args, item=index, http=http),
            step_id=step.id,
            item=index,
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
    shared = {k: v for k, v in args.items() if k not in {"items", EACH_KEY, DONE_KEY}}
    policy = item_policy(ctx, step)
    done = args.get(DONE_KEY) or [None] * len(items)

    def one(index: int) -> tuple[Any, dict | None]:
        if done[index] is not None:  # succeeded before: kept, not called again
            return done[index][0], None
        try:
            return _call_item(ctx, step, {**shared, **each[index]}, policy, index), None
        except OutputTooLarge as exc:  # a tool does not know which step called it
            return None, ctx.redactor.scrub(exc.for_step(step.id).as_dict())
        except FlowpilotError as exc:
            return None, ctx.redactor.scrub(exc.as_dict())

    bound = step.items_in_flight
    # Each item runs in a copy of this thread's context: its try's span and log ids are
    # then children of the foreach step's try (runs.engine.tracing, tools.logcontext).
    with ThreadPoolExecutor(max_workers=bound, thread_name_prefix=step.id) as pool:
        futures = [
            pool.submit(contextvars.copy_context().run, one, index) for index in range(len(items))
        ]
        outcomes = [future.result() for future in futures]
    errors: list[dict[str, Any]] = [
        {"index": i, "item": items[i], "error": err} for i, (_, err) in enumerate(outcomes) if err
    ]
    results = [result for result, _ in outcomes]
    output = {"items": results, "count": len(results), "errors": errors}
    if errors and step.on_error != "continue":
        first = errors[0]
        raise ForeachItemsFailed(
            f"step `{step.id}`: {len(errors)} of {len(items)} items failed; first, item "
            f"{first['index']}: {first['error']['type']}: {first['error']['message']}",
            progress=output,
        )
    return Attempt(output=output)


def plan_foreach_step(step: ForeachStep, graph: FlowGraph, describe: Describe) -> list[str]:
    """The per-item mapping, after the shared one."""
    lines = [f"        per item ({step.items_in_flight} at a time):"]
    lines += [f"          {name} = {describe(value)}" for name, value in step.item_mapping.items()]
    return lines


KIND = StepKind(
    model=ForeachStep,
    execute=execute_foreach_step,
    plan=plan_foreach_step,
    carry=carry_progress,
    progress=foreach_progress,
)
