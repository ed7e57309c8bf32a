"""`llm` steps, and the LLM form of `decision` steps.

An ``llm`` step renders its prompt over its mapped values only (``{{name}}``;
no ``env`` is given to the renderer, so ``{{env.X}}`` can never read a secret),
then runs a bounded tool-calling loop: the model may call only the tools in the
step's own ``tools`` allowlist, each call goes through ``call_tool`` (which
enforces the flow allowlist), and the loop stops after ``max_turns`` model
calls. ``budget`` caps tokens, model calls and tool calls; crossing one is a
fatal ``BudgetExceeded``. With ``output_schema`` the answer is requested as
structured output and validated with jsonschema. Everything sent is scrubbed
with the run's redactor first.

Each model call gets at most the time left of the step's ``timeout`` (retries
included), its endpoint (``endpoint``: a named one from ``FLOWPILOT_LLM_ENDPOINTS``)
and its sampling options (``temperature``, ``max_output_tokens``, ``seed``, ``model``).
Before each call the conversation is fitted into ``context_budget_chars``
(``llm_history``: oldest tool results truncated, then dropped).

Output: ``{"result": …, "conversation": [messages…], "usage": {…}, "history_trimmed":
{…}}`` — the conversation is append-only, every message in full.

A decision with ``decision_prompt`` asks the model to choose one of its
branches (an enum in a json_schema response): ``{"branch", "reason", "usage"}``.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from jsonschema import Draft202012Validator

from runs.engine.context import RunContext
from runs.engine.kinds.base import (
    Attempt,
    Describe,
    StepKind,
    StepKindUnsupported,
    call_tool,
    debug_text,
)
from runs.engine.kinds.llm_history import HistoryTrim, fit_history
from tools.errors import FlowpilotError
from tools.llm import (
    DEFAULT_ENDPOINT,
    ChatTap,
    LLMClient,
    LLMReply,
    LLMReplyInvalid,
    ToolCall,
    Usage,
    llm_endpoint_ready,
    parse_json_reply,
)
from tools.llm.prices import usd_text
from tools.templating import render_text
from workflows.graph import FlowGraph
from workflows.schema import DecisionStep, LLMStep

DEFAULT_SYSTEM = (
    "You are one step of an automated workflow. Do the task with the data you are given. "
    "Call a tool only when the task needs it; answer plainly when you are done."
)
DECISION_SYSTEM = (
    "You route an automated workflow: choose exactly one of the given branches and give a "
    "one-sentence reason."
)
MAX_TOOL_RESULT_CHARS = 20_000
MAX_VALUES_CHARS = 20_000
DEFAULT_CONTEXT_BUDGET_CHARS = 200_000  # FLOWPILOT_LLM_CONTEXT_BUDGET_CHARS

# ``--log-level debug``: an llm step's prompt and each reply, scrubbed and cut.
logger = logging.getLogger("flowpilot.engine.llm")


def _log_prompt(ctx: RunContext, step_id: str, messages: list[dict[str, Any]]) -> None:
    prompt = messages[-1].get("content") or ""  # already scrubbed
    logger.debug("run %s step %s: llm prompt %s", ctx.run_id, step_id, debug_text(str(prompt)))


def _log_reply(ctx: RunContext, step_id: str, reply: LLMReply) -> None:
    if not logger.isEnabledFor(logging.DEBUG):
        return
    said = ctx.redactor.scrub_text(reply.content or "")
    calls = ", ".join(call.name for call in reply.tool_calls)
    logger.debug(
        "run %s step %s: llm reply (%s, %s tokens)%s %s",
        ctx.run_id,
        step_id,
        reply.model,
        reply.usage.total_tokens,
        f" calls {calls};" if calls else "",
        debug_text(said),
    )


class BudgetExceeded(FlowpilotError):
    """An ``llm`` step crossed its token, call or tool-call budget."""

    code = "budget_exceeded"


class LLMTurnsExhausted(FlowpilotError):
    """The model was still calling tools after ``max_turns`` turns."""

    code = "max_turns_exceeded"


class LLMOutputInvalid(FlowpilotError):
    """The final answer is not JSON, or does not fit the step's ``output_schema``."""

    code = "llm_output_invalid"


@dataclass
class Meter:
    """Usage and budget of one step attempt."""

    step_id: str
    max_tokens: int | None = None
    max_calls: int | None = None
    max_tool_calls: int | None = None
    usage: Usage = field(default_factory=Usage)
    calls: int = 0
    tool_calls: int = 0
    per_call: list[dict[str, Any]] = field(default_factory=list)

    def before_call(self) -> None:
        if self.max_calls is not None and self.calls >= self.max_calls:
            raise BudgetExceeded(
                f"step `{self.step_id}` needs another model call, but its budget allows "
                f"{self.max_calls} (max_calls)"
            )

    def after_call(self, reply: LLMReply, endpoint: str = "") -> None:
        self.calls += 1
        self.usage = self.usage + reply.usage
        entry = {"model": reply.model, **reply.usage.as_dict(), "http_tries": len(reply.attempts)}
        if endpoint:
            entry["endpoint"] = endpoint
        self.per_call.append(entry)
        if self.max_tokens is not None and self.usage.total_tokens > self.max_tokens:
            raise BudgetExceeded(
                f"step `{self.step_id}` used {self.usage.total_tokens} tokens, over its budget "
                f"of {self.max_tokens} (max_tokens)"
            )

    def before_tool_call(self, name: str) -> None:
        if self.max_tool_calls is not None and self.tool_calls >= self.max_tool_calls:
            raise BudgetExceeded(
                f"step `{self.step_id}`: the model asked for tool `{name}`, but the budget "
                f"allows {self.max_tool_calls} tool call(s) (max_tool_calls)"
            )
        self.tool_calls += 1

    def as_dict(self) -> dict[str, Any]:
        return {
            **self.usage.as_dict(),
            "calls": self.calls,
            "tool_calls": self.tool_calls,
            "per_call": self.per_call,
        }


def execute_llm_step(ctx: RunContext, step: LLMStep, args: dict[str, Any]) -> Attempt:
    llm = _client(ctx, step)
    deadline = _deadline(step)
    budget = step.budget
    meter = Meter(step.id, budget.max_tokens, budget.max_calls, budget.max_tool_calls)
    trim = HistoryTrim(step.context_budget_chars or _default_context_budget())
    conversation: list[dict[str, Any]] = ctx.redactor.scrub(
        [
            {"role": "system", "content": step.system or DEFAULT_SYSTEM},
            {"role": "user", "content": _render(step.prompt, args, _cap(ctx, step))},
        ]
    )
    tools = _tool_definitions(ctx, step)
    fmt = _output_format(step)
    _log_prompt(ctx, step.id, conversation)
    for _turn in range(step.max_turns):
        meter.before_call()
        sent = fit_history(conversation, trim)
        with _counted(ctx, step, llm, sent, tools) as paid:
            reply = llm.chat(
                sent,
                tools=tools,
                response_format=fmt,
                deadline=deadline,
                tap=_chat_tap(ctx, step),
                **step.call_options(),
            )
            paid(reply)
        _log_reply(ctx, step.id, reply)
        meter.after_call(reply, llm.endpoint)
        conversation.append(ctx.redactor.scrub(reply.message()))
        if not reply.tool_calls:
            result = _final_result(step, reply.content)
            output = {
                "result": result,
                "conversation": conversation,
                "usage": meter.as_dict(),
                "history_trimmed": trim.as_dict(),
            }
            return Attempt(output=output)  # masked only where stored (checkpoint)
        for call in reply.tool_calls:
            conversation.append(_tool_message(ctx, step, call, meter))
    raise LLMTurnsExhausted(
        f"step `{step.id}` was still calling tools after {step.max_turns} turn(s) (max_turns); "
        "raise max_turns or make the prompt more direct"
    )


def execute_llm_decision(ctx: RunContext, step: DecisionStep, args: dict[str, Any]) -> Attempt:
    """A decision in LLM form: the model picks one of ``step.branches``."""
    llm = _client(ctx, step)
    values = _capped(json.dumps(args, ensure_ascii=False, default=str), MAX_VALUES_CHARS)
    question = (
        f"{_render(step.decision_prompt or '', args, _cap(ctx, step))}\n\nValues:\n{values}\n\n"
        f"Choose one branch of: {', '.join(step.branches)}."
    )
    messages = ctx.redactor.scrub(
        [{"role": "system", "content": DECISION_SYSTEM}, {"role": "user", "content": question}]
    )
    schema = {
        "type": "object",
        "properties": {
            "branch": {"type": "string", "enum": list(step.branches)},
            "reason": {"type": "string"},
        },
        "required": ["branch", "reason"],
        "additionalProperties": False,
    }
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "decision", "schema": schema, "strict": True},
    }
    budget = step.budget
    meter = Meter(step.id, budget.max_tokens)
    _log_prompt(ctx, step.id, messages)
    with _counted(ctx, step, llm, messages) as paid:
        reply = llm.chat(
            messages,
            response_format=fmt,
            deadline=_deadline(step),
            tap=_chat_tap(ctx, step),
            **step.call_options(),
        )
        paid(reply)
    _log_reply(ctx, step.id, reply)
    meter.after_call(reply, llm.endpoint)
    answer = _parsed(step, reply.content)
    branch = answer.get("branch") if isinstance(answer, dict) else None
    if branch not in step.branches:
        raise LLMOutputInvalid(
            f"decision `{step.id}`: the model chose {branch!r}, which is not one of its "
            f"branches ({', '.join(step.branches)})"
        )
    reason = answer.get("reason")
    output = {
        "branch": branch,
        "reason": reason if isinstance(reason, str) else "",
        "usage": meter.as_dict(),
    }
    return Attempt(output=output, branch=branch)


# --- pieces -----------------------------------------------------------------------------


def _client(ctx: RunContext, step: LLMStep | DecisionStep) -> LLMClient:
    """The run's client for the step's endpoint (``default``: the run's own client)."""
    llm = ctx.llm_for(step.endpoint)
    if llm is None:
        llm_endpoint_ready(step.endpoint)  # no LLM configured: LLMNotConfigured, what to set
        raise StepKindUnsupported(f"step `{step.id}` needs an LLM, but this run has no LLM client")
    return llm


@contextmanager
def _counted(
    ctx: RunContext,
    step: LLMStep | DecisionStep,
    llm: LLMClient,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None = None,
) -> Iterator[Callable[[LLMReply], None]]:
    """One model call through the run's money ledger (``runs.engine.spend``): refused
    before it is made when a budget in money cannot fit it, counted after."""
    endpoint = llm.endpoint or step.endpoint or DEFAULT_ENDPOINT
    model = step.model or llm.model
    with _traced(ctx, step, llm, endpoint, model) as traced:

        def counted(reply: LLMReply) -> None:
            traced(reply)
            if ctx.metrics is not None:
                _metered(ctx, llm, endpoint, model, reply)

        if ctx.spend is None:  # a replay: its answers are recorded, nothing is paid
            yield counted
            return
        with ctx.spend.call(
            step, endpoint=endpoint, model=model, prices=llm.prices, messages=messages, tools=tools
        ) as paid:

            def answered(reply: LLMReply) -> None:
                paid(reply)
                counted(reply)

            yield answered


def _metered(ctx: RunContext, llm: LLMClient, endpoint: str, model: str, reply: LLMReply) -> None:
    """The call in the process's metrics, under the model the step asks for (a name from
    the definition or the settings: the answering model's name is the endpoint's)."""
    assert ctx.metrics is not None
    usage = reply.usage
    ctx.metrics.llm_call(
        workflow=ctx.spec.name,
        endpoint=endpoint,
        model=model,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        cost_pico=llm.prices.charge(
            reply.model, model, usage.prompt_tokens, usage.completion_tokens
        ),
    )


@contextmanager
def _traced(
    ctx: RunContext, step: LLMStep | DecisionStep, llm: LLMClient, endpoint: str, model: str
) -> Iterator[Callable[[LLMReply], None]]:
    """A model call's span (``runs.engine.tracing``): endpoint, model, tokens; nothing of
    what was said. Nothing at all when tracing is off."""
    if ctx.tracer is None:
        yield lambda reply: None
        return
    tracer = ctx.tracer
    attributes = {"gen_ai.request.model": model, "flowpilot.llm_endpoint": endpoint}
    with tracer.call(f"llm {endpoint}", attributes) as span:

        def answered(reply: LLMReply) -> None:
            usage = reply.usage
            cost = llm.prices.charge(
                reply.model, model, usage.prompt_tokens, usage.completion_tokens
            )
            tracer.call_ended(
                span,
                attributes={
                    "gen_ai.response.model": reply.model,
                    "gen_ai.usage.input_tokens": usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": usage.completion_tokens,
                    "flowpilot.cost_usd": None if cost is None else float(usd_text(cost) or 0),
                },
            )

        try:
            yield answered
        except FlowpilotError as exc:
            tracer.call_ended(span, error=exc.as_dict())
            raise


def _chat_tap(ctx: RunContext, step: LLMStep | DecisionStep) -> ChatTap | None:
    """The tap of one model call of the step: a validation run records it, a replay
    answers it (``runs.replay``); None for any other run."""
    if ctx.taps is None:
        return None
    endpoint = step.endpoint or DEFAULT_ENDPOINT
    return ctx.taps.chat_tap_for(
        step.id, endpoint=endpoint, model=step.model, redactor=ctx.redactor
    )


def _deadline(step: LLMStep | DecisionStep) -> float | None:
    """The step's ``timeout`` as a monotonic instant: it bounds every model call of the
    attempt, retries included (tool calls keep their own limits)."""
    return time.monotonic() + step.timeout if step.timeout else None


def _default_context_budget() -> int:
    return int(getattr(settings, "FLOWPILOT_LLM_CONTEXT_BUDGET_CHARS", 0)) or (
        DEFAULT_CONTEXT_BUDGET_CHARS
    )


def _render(template: str, args: dict[str, Any], max_bytes: int | None = None) -> str:
    """The prompt over the mapped values; ``env`` is empty on purpose. Bounded by the
    step's size cap before it is built (``tools.templating``)."""
    return render_text(template, args, env={}, max_bytes=max_bytes)


def _cap(ctx: RunContext, step: LLMStep | DecisionStep) -> int:
    return ctx.limits.step_output_cap(step.max_output_bytes)


def _tool_definitions(ctx: RunContext, step: LLMStep) -> list[dict[str, Any]] | None:
    described = ctx.registry.describe(step.tools)
    if not described:
        return None
    return [
        {
            "type": "function",
            "function": {
                "name": d["name"],
                "description": d.get("description", ""),
                "parameters": d.get("inputSchema") or {"type": "object", "properties": {}},
            },
        }
        for d in described
    ]


def _output_format(step: LLMStep) -> dict[str, Any] | None:
    if step.output_schema is None:
        return None
    return {
        "type": "json_schema",
        "json_schema": {"name": f"{step.id}_output", "schema": step.output_schema, "strict": False},
    }


def _tool_message(ctx: RunContext, step: LLMStep, call: ToolCall, meter: Meter) -> dict[str, Any]:
    """Run one requested tool call (if the step allows it) and answer it as a tool message."""
    if call.name not in step.tools:
        allowed = ", ".join(step.tools) or "none"
        content: Any = {
            "error": {
                "type": "tool_not_allowed",
                "message": f"tool `{call.name}` is not available to this step (allowed: {allowed})",
            }
        }
    else:
        meter.before_tool_call(call.name)
        try:
            # Each tool call of the step sends its own Idempotency-Key (`run:step:N`).
            args = call.parsed_arguments()
            content = call_tool(ctx, step, call.name, args, item=meter.tool_calls).output
        except FlowpilotError as exc:
            content = {"error": exc.as_dict()}
    text = json.dumps(ctx.redactor.scrub(content), ensure_ascii=False, default=str)
    return {
        "role": "tool",
        "tool_call_id": call.id,
        "content": _capped(text, MAX_TOOL_RESULT_CHARS),
    }


def _capped(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"… [truncated: {len(text)} characters in all]"


def _final_result(step: LLMStep, content: str | None) -> Any:
    if step.output_schema is None:
        return content or ""
    value = _parsed(step, content)
    validator = Draft202012Validator(step.output_schema)
    problems = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if problems:
        lines = "; ".join(f"{_where(e.absolute_path)}: {e.message}" for e in problems[:10])
        raise LLMOutputInvalid(
            f"step `{step.id}`: the model's answer does not fit the output_schema: {lines}"
        )
    return value


def _parsed(step: LLMStep | DecisionStep, content: str | None) -> Any:
    try:
        return parse_json_reply(content)
    except LLMReplyInvalid as exc:
        raise LLMOutputInvalid(f"step `{step.id}`: {exc.message}") from exc


def _where(path: Iterable[Any]) -> str:
    text = "$"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


# --- the dry run --------------------------------------------------------------------

DRY_RUN_PROMPT_CHARS = 1200


def model_line(step: LLMStep | DecisionStep) -> str:
    if step.model:
        return f"        model: {step.model}"
    return f"        model: {settings.PLANNER_MODEL} (PLANNER_MODEL, the endpoint's default)"


def prompt_lines(
    label: str, template: str, mapping: dict[str, Any], describe: Describe
) -> list[str]:
    """The prompt rendered over the values known before the run; the rest as ``<ref>``."""
    values = {name: describe.known(value) for name, value in mapping.items()}
    try:
        text = _render(template, values)
    except FlowpilotError as exc:
        return [f"        {label} (not rendered: {exc.message}):", *_indented(template)]
    return [f"        {label}:", *_indented(_capped(text, DRY_RUN_PROMPT_CHARS))]


def _indented(text: str) -> list[str]:
    return [f"          | {line}" for line in text.splitlines() or [""]]


def plan_llm_step(step: LLMStep, graph: FlowGraph, describe: Describe) -> list[str]:
    """An llm step in the dry run: model, tools, output schema, the rendered prompt."""
    lines = [model_line(step), f"        tools: {', '.join(step.tools) or 'none'}"]
    if step.output_schema is not None:
        lines.append("        output: structured (output_schema)")
    lines.append(f"        max_turns: {step.max_turns}")
    return lines + prompt_lines("prompt", step.prompt, step.input_mapping, describe)


KIND = StepKind(model=LLMStep, execute=execute_llm_step, plan=plan_llm_step)
