"""Building a run's context: a compiled plan plus the per-run objects, fresh per run.

``build_run_context`` takes the compiled version (``runs.engine.plan``, shared per
definition) and adds what belongs to one run: its registry view, the environment it
may read, the redactor, the HTTP, LLM and MCP clients, the circuit breakers, the
limits. It sits above the step kinds (compiling a plan asks each kind what it
compiles), while the context's type (``runs.engine.context``) sits below them.
"""

from __future__ import annotations

import contextlib
import os
import random
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
from django.conf import settings

from runs.engine.context import CallTaps, Limits, RunContext
from runs.engine.http import process_http_client, run_http_client
from runs.engine.metrics import metrics_enabled, process_metrics
from runs.engine.plan import CompiledPlan, compile_plan
from runs.engine.spend import Spend
from runs.engine.tracing import run_tracer, tracing_enabled
from tools.breaker.setup import breakers_from_settings
from tools.calls import ToolCallContext
from tools.llm import LLMClient, LLMNotConfigured
from tools.mcp.session import McpSessions
from tools.ratelimit.setup import pacer_from_settings
from tools.registry import ToolRegistry
from tools.secrets import redactor_for
from workflows.schema import WorkflowSpec
from workflows.validation.env_access import allowed_env, declared_env_names, env_allowlist


def build_run_context(
    *,
    run_id: int,
    run_uuid: str | None = None,
    spec: WorkflowSpec | None = None,
    plan: CompiledPlan | None = None,
    registry: ToolRegistry | None = None,
    env: Mapping[str, str] | None = None,
    limits: Limits | None = None,
    sleep: Callable[[float], None] | None = None,
    rand: random.Random | None = None,
    llm: LLMClient | None = None,
    taps: CallTaps | None = None,
    http: httpx.Client | None = None,
) -> RunContext:
    """A fresh context for one run: its own registry view, clients and redactor.

    ``plan`` is the compiled version (``runs.engine.caches.plan_for`` shares one per
    definition); without it ``spec`` is compiled here.

    The LLM client is ``llm`` when given, else built from settings when the
    workflow needs one (and closed with the context); with no LLM configured
    (``LLMNotConfigured``) there is none, and each llm step fails saying what to set.
    ``http`` is a client shared beyond the run (``runs.engine.http.process_http_client``),
    left open when the context closes; without it the run gets a client of its own.
    """
    if plan is None:
        if spec is None:
            raise TypeError("build_run_context needs a spec or a compiled plan")
        plan = compile_plan(spec)
    spec = plan.spec
    limits = limits or Limits.from_settings()
    registry = registry if registry is not None else ToolRegistry.from_db()
    full_env = os.environ if env is None else env
    context = RunContext(
        run_id=run_id,
        # A context built without a stored run (benchmarks, tests) still gets unique keys.
        run_uuid=run_uuid or str(uuid.uuid4()),
        spec=spec,
        graph=plan.graph,
        registry=registry,
        env=_readable_env(full_env, plan.allowed_tools, registry),
        redactor=redactor_for(registry, full_env),
        http=run_http_client() if http is None else http,
        owns_http=http is None,
        limits=limits,
        output_dir=Path(settings.FLOWPILOT_OUTPUT_DIR),
        data_dirs=tuple(Path(p) for p in settings.FLOWPILOT_DATA_DIRS),
        parsed=plan.parsed,
        parsed_items=plan.parsed_items,
        allowed_tools=plan.allowed_tools,
        compiled=plan.compiled,
        ready=plan.ready,
        breakers=breakers_from_settings(),
        pacer=pacer_from_settings(),
    )
    context.mcp = McpSessions(env=context.env, redactor=context.redactor)
    if llm is not None:
        context.llm = llm
    elif plan.needs_llm:
        offline = taps is not None and taps.offline  # a replay sends nothing: no key needed
        with contextlib.suppress(LLMNotConfigured):  # its llm steps fail saying what to set
            context.llm, context.owns_llm = LLMClient.from_settings(offline=offline), True
    context.taps = taps
    replay = taps is not None and taps.offline
    if plan.calls_models and not replay:
        # Every model call counted, budgets in money kept (a replay calls no model).
        context.spend = Spend(
            run_id=run_id,
            workflow=spec.name,
            budget=spec.budget,
            now=lambda: context.now(),
            output_tokens_guess=settings.FLOWPILOT_LLM_ESTIMATE_OUTPUT_TOKENS,
        )
    # A replay is an offline comparison: neither counted nor traced (its answers are
    # recordings, and it is never announced, so its root span would never come).
    if metrics_enabled() and not replay:
        context.metrics = process_metrics()
    if tracing_enabled() and not replay:
        context.tracer = run_tracer(
            run_id=run_id,
            run_uuid=context.run_uuid,
            workflow=spec.name,
            version_hash=plan.definition_hash(),
            redactor=context.redactor,
        )
    if replay:
        context.pacer = None  # a replay sends nothing: no slot to wait for, no header to read
    if sleep is not None:
        context.sleep = sleep
    if rand is not None:
        context.rand = rand
    return context


def outside_run_call_context(
    *, tool: str, registry: ToolRegistry, env: Mapping[str, str] | None = None
) -> ToolCallContext:
    """The context of a call of ``tool`` that belongs to no run (a poll trigger's):
    what a step's call would get, with the variables that tool declares, the
    process's shared HTTP client, the circuit breakers and the rate limits every run
    shares; no MCP sessions kept, no recording, no idempotency key."""
    full_env = os.environ if env is None else env
    limits = Limits.from_settings()
    return ToolCallContext(
        env=_readable_env(full_env, frozenset({tool}), registry),
        redactor=redactor_for(registry, full_env),
        http=process_http_client(),
        max_response_bytes=limits.max_response_bytes,
        max_output_bytes=limits.step_output_cap(None),
        output_dir=Path(settings.FLOWPILOT_OUTPUT_DIR),
        data_dirs=tuple(Path(p) for p in settings.FLOWPILOT_DATA_DIRS),
        breakers=breakers_from_settings(),
        pacer=pacer_from_settings(),
    )


def _readable_env(
    env: Mapping[str, str], allowed: frozenset[str], registry: ToolRegistry
) -> dict[str, str]:
    """The variables this run may read: those its ``allowed`` tools (the compiled plan's
    allowlist: every step task builds a context, so no walk over the steps here) declare,
    and the operator's ``FLOWPILOT_ENV_ALLOW`` (the validator's ``env_not_allowed`` rule)."""
    tools = (registry.get(name) for name in sorted(allowed))
    return allowed_env(env, declared=declared_env_names(tools), allow=env_allowlist())
