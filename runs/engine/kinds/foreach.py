"""`foreach` steps: one tool call per item of the mapped list ``items``.

Parameters mapped in ``input_mapping`` (other than ``items``) go to every call;
``item_mapping`` gives per-item parameters from ``$item``, ``$item.path``,
``$index``, run inputs and upstream outputs (``resolve_step_call`` resolves them).
At most ``concurrency`` calls are in flight; each item retries under the step's
(else the tool's) policy. The output keeps input order:
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
from runs.engine.resolve import EACH_KEY
from tools.errors import FlowpilotError, ToolInputError, ToolRateLimited
from tools.policy import RetryPolicy
from workflows.graph import FlowGraph
from workflows.schema import ForeachStep

MAX_ITEMS = 10_000


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
    attempt = 1
    with tool_session(ctx.http, ctx.registry, step.tool) as http:  # cookies: one item
        while True:
            try:
                return call_tool(ctx, step, step.tool, args, item=index, http=http).output
            except FlowpilotError as exc:
                if not exc.retryable or attempt >= policy.max_attempts:
                    raise
                delay = policy.delay(attempt, ctx.rand.random())
                if isinstance(exc, ToolRateLimited) and exc.retry_after:
                    delay = max(delay, min(exc.retry_after, policy.max_delay))
                ctx.sleep(delay)
                attempt += 1


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
        except FlowpilotError as exc:
            return None, ctx.redactor.scrub(exc.as_dict())

    with ThreadPoolExecutor(max_workers=step.concurrency, thread_name_prefix=step.id) as pool:
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
    lines = [f"        per item (concurrency {step.concurrency}):"]
    lines += [f"          {name} = {describe(value)}" for name, value in step.item_mapping.items()]
    return lines


KIND = StepKind(model=ForeachStep, execute=execute_foreach_step, plan=plan_foreach_step)
