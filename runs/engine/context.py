"""Per-run objects, built once per run and passed explicitly (no module state).

A ``RunContext`` holds everything a step needs that is not its own mapped inputs:
the frozen spec and graph, a registry view, the environment snapshot (only the
variables the workflow may read), the redactor (already holding the secret values
of every registered tool: ``tools.secrets.redactor_for``), the HTTP client (which
keeps no cookies), the LLM client (when the workflow has ``llm`` steps or LLM
decisions), the circuit breakers (a handle on the state every worker shares), the
MCP sessions (one per server, stopped with the context), the limits, the taps of its tool and model
calls (a validation run records them, a replay serves them: ``runs.replay``), and the
injected clock/sleep/random so tests can pin them.

This module is the context's type, low in the engine: the step kinds, the resolver
and the drivers import it, and it imports none of them. Building one from a compiled
plan is ``runs.engine.build`` (``build_run_context``), which sits above the kinds.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import httpx
from django.conf import settings
from django.utils import timezone

from runs.engine.readiness import ReadyPlan
from tools.breaker.core import CircuitBreakers
from tools.calls import CallTap
from tools.llm import DEFAULT_ENDPOINT, ChatTap, LLMClient
from tools.mcp.session import McpSessions
from tools.ratelimit.core import Pacer
from tools.redaction import Redactor
from tools.registry import ToolRegistry
from workflows.graph import FlowGraph
from workflows.schema import WorkflowSpec

if TYPE_CHECKING:  # the ledger's models load with the first llm run
    from runs.engine.metrics import Metrics
    from runs.engine.spend import Spend
    from runs.engine.tracing import RunTracer

Clock = Callable[[], datetime]
DEFAULT_CLOCK: Clock = timezone.now  # the engine's only wall clock; tests inject their own


@dataclass(frozen=True)
class Limits:
    max_response_bytes: int
    max_stored_output_bytes: int
    max_parallel_steps: int
    max_step_output_bytes: int = 4 * 1024 * 1024  # FLOWPILOT_MAX_STEP_OUTPUT_BYTES
    max_step_output_limit: int = 64 * 1024 * 1024  # FLOWPILOT_MAX_STEP_OUTPUT_BYTES_LIMIT

    @classmethod
    def from_settings(cls) -> Limits:
        return cls(
            max_response_bytes=settings.FLOWPILOT_MAX_RESPONSE_BYTES,
            max_stored_output_bytes=settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES,
            max_parallel_steps=settings.FLOWPILOT_MAX_PARALLEL_STEPS,
            max_step_output_bytes=settings.FLOWPILOT_MAX_STEP_OUTPUT_BYTES,
            max_step_output_limit=settings.FLOWPILOT_MAX_STEP_OUTPUT_BYTES_LIMIT,
        )

    def step_output_cap(self, own: int | None) -> int:
        """The size cap of a step: its own ``max_output_bytes`` (never above the operator
        maximum, which validation enforces too), else the default."""
        if own is None:
            return self.max_step_output_bytes
        return min(own, self.max_step_output_limit)


class CallTaps(Protocol):
    """The taps of a run's calls: one per tool call, by step, item (foreach item or llm
    tool-call index) and tool (``tap_for``: its HTTP exchanges or MCP call), and one per
    model call of an ``llm`` step or LLM decision (``chat_tap_for``: by step, with the
    endpoint's name and the model the step names, None for the endpoint's default).
    ``flush()`` stores what they kept so far (a Celery step task flushes before it writes
    the step's outcome, which may finish the run: whoever sees the run finished finds
    its calls); ``close()`` (with the context) stores what is left."""

    def tap_for(self, step_id: str, item: int | None, tool: str) -> CallTap: ...

    def chat_tap_for(
        self, step_id: str, *, endpoint: str, model: str | None, redactor: Redactor
    ) -> ChatTap: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...

    @property
    def offline(self) -> bool:
        """True when every call is answered by the taps and nothing is sent (a replay)."""
        ...


@dataclass
class RunContext:
    run_id: int
    run_uuid: str  # globally unique (Run.uuid): the base of the idempotency keys
    spec: WorkflowSpec
    graph: FlowGraph
    registry: ToolRegistry
    env: Mapping[str, str]
    redactor: Redactor
    http: httpx.Client
    limits: Limits
    output_dir: Path
    data_dirs: tuple[Path, ...]
    parsed: Mapping[str, Mapping[str, Any]]  # step id -> parsed input mapping (shared: read only)
    parsed_items: Mapping[str, Mapping[str, Any]]  # foreach step id -> parsed item mapping
    allowed_tools: frozenset[str]
    compiled: Mapping[tuple[str, str], Any]  # (step id, branch label | "expression") -> compiled
    ready: ReadyPlan  # the graph's child lists and order, for the incremental readiness
    llm: LLMClient | None = None  # for llm steps and LLM decisions; None when none needs it
    owns_llm: bool = False  # built here (closed with the context), not passed in
    owns_http: bool = True  # False: a client shared by the process, left open on close
    named_llms: dict[str, LLMClient] = field(default_factory=dict)  # named endpoints, lazily
    breakers: CircuitBreakers | None = None  # per-host circuit breakers; None: off
    pacer: Pacer | None = None  # rate limits and adaptive pacing (tools.ratelimit); None: off
    mcp: McpSessions | None = None  # this run's MCP sessions, opened on first use
    taps: CallTaps | None = None  # records (validation) or replays the tool and model calls
    spend: Spend | None = None  # the money ledger of its model calls (runs.engine.spend)
    tracer: RunTracer | None = None  # its spans (runs.engine.tracing); None: tracing is off
    # The run its tools name (a report's "run N" stamp): itself, or for a replay the
    # validation run it reproduces, so a replayed report is the recorded one, byte for byte.
    shown_run_id: int | None = None
    metrics: Metrics | None = None  # the process's (runs.engine.metrics); None: off
    # In process: drives a `workflow` step's child run to its end (``runs.services`` sets
    # it); None on Celery, where such a step parks instead (runs/engine/kinds/workflow.py).
    run_child: Callable[[Any], Any] | None = None
    # Creates a `workflow` step's child run ``(step, args, parent step result) -> Run``;
    # None: the active version, as approved (``runs.replay`` sets it: a replay child).
    create_child: Callable[[Any, Any, Any], Any] | None = None
    now: Clock = DEFAULT_CLOCK
    sleep: Callable[[float], None] = time.sleep
    rand: random.Random = field(default_factory=random.Random)

    def llm_for(self, endpoint: str | None) -> LLMClient | None:
        """The client of a named LLM endpoint, built on first use and closed with the
        context; ``None``/``default``: the run's own client (``llm``)."""
        if not endpoint or endpoint == DEFAULT_ENDPOINT:
            return self.llm
        if endpoint not in self.named_llms:
            self.named_llms[endpoint] = LLMClient.from_settings(endpoint=endpoint)
        return self.named_llms[endpoint]

    def close(self) -> None:
        if self.taps is not None:
            self.taps.close()
        if self.owns_http:
            self.http.close()
        if self.llm is not None and self.owns_llm:
            self.llm.close()
        for client in self.named_llms.values():
            client.close()
        if self.breakers is not None:
            self.breakers.close()
        if self.pacer is not None:
            self.pacer.close()
        if self.mcp is not None:
            self.mcp.close()

    def __enter__(self) -> RunContext:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
