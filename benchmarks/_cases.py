"""The measurements. Imported only after ``django.setup()`` (see ``_support``).

Every engine measurement goes through the public services — ``run_create``
(validation + rows), ``build_run_context``, ``run_execute`` (the in-process
driver with its per-step checkpoints) — with a ``ToolRegistry`` holding one
http tool that points at the loopback server. Each baseline does the same
requests, or the same graph work, in plain Python.
"""

from __future__ import annotations

import functools
import random
import ssl
from collections import deque
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
from django.conf import settings

from benchmarks._support import Row, compare
from runs.engine.build import build_run_context
from runs.engine.context import Limits
from runs.models import RunStatus, RunTrigger
from runs.services import run_create, run_execute
from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from workflows.graph import build_graph
from workflows.models import Workflow
from workflows.schema import WorkflowSpec
from workflows.services import workflow_import, workflow_spec
from workflows.validator import validate_workflow

TOOL = "bench_ping"
FANOUT_DELAY_MS = 100
CHAIN_TARGET_MS = 5.0
FANOUT_TARGET_RATIO = 1.5
VALIDATE_TARGET_S = 1.0


def ping_tool(base_url: str) -> ToolSpec:
    """``GET {base_url}/ping?seq=…&delay_ms=…`` → ``{"n": seq + 1}``."""
    return ToolSpec.model_validate(
        {
            "name": TOOL,
            "description": "Loopback benchmark endpoint.",
            "input_schema": {
                "type": "object",
                "properties": {
                    "seq": {"type": "integer"},
                    "other": {"type": "integer"},
                    "delay_ms": {"type": "integer"},
                },
                "required": ["seq"],
                "additionalProperties": False,
            },
            "http": {
                "base_url": base_url,
                "request": {
                    "method": "GET",
                    "url": "/ping",
                    "query": {"seq": "{{seq}}", "delay_ms": "{{delay_ms}}"},
                },
                "response_extract": {"n": "n"},
                "timeout": 10,
            },
        }
    )


def _step(step_id: str, mapping: dict[str, Any]) -> dict[str, Any]:
    return {"id": step_id, "kind": "tool", "tool": TOOL, "input_mapping": mapping}


def chain_definition(n: int) -> dict[str, Any]:
    """``s0000 → s0001 → …``: each step sends the ``n`` its parent received."""
    ids = [f"s{i:04d}" for i in range(n)]
    steps = [_step(ids[0], {"seq": 0})]
    steps += [_step(ids[i], {"seq": f"{ids[i - 1]}.n"}) for i in range(1, n)]
    return {"name": f"bench_chain_{n}", "steps": steps}


def fanout_definition(n: int, delay_ms: int) -> dict[str, Any]:
    """``n`` independent steps, each a ``delay_ms`` call."""
    steps = [_step(f"f{i:04d}", {"seq": i, "delay_ms": delay_ms}) for i in range(n)]
    return {"name": f"bench_fanout_{n}", "steps": steps}


def layered_dag(n: int, *, seed: int = 5000) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """A layered DAG of ``n`` steps, about √n wide, and its (parent, child) edges.

    Every step after the first layer reads one step of the layer before it and
    one of any earlier layer (two references, two inferred edges), chosen with a
    seeded ``random.Random``, so every run validates the same graph.
    """
    rand = random.Random(seed)
    width = max(1, round(n**0.5))
    ids = [f"s{i:05d}" for i in range(n)]
    steps, edges = [], []
    for i, step_id in enumerate(ids):
        layer = i // width
        if layer == 0:
            steps.append(_step(step_id, {"seq": i}))
            continue
        previous = ids[rand.randrange((layer - 1) * width, layer * width)]
        earlier = ids[rand.randrange(0, layer * width)]
        steps.append(_step(step_id, {"seq": f"{previous}.n", "other": f"{earlier}.n"}))
        edges += sorted({(previous, step_id), (earlier, step_id)})
    return {"name": f"bench_dag_{n}", "steps": steps}, edges


class EngineRunner:
    """Imports a definition once, then runs it end to end through the run services."""

    def __init__(self, registry: ToolRegistry, limits: Limits) -> None:
        self.registry = registry
        self.limits = limits

    def prepare(self, definition: dict[str, Any]) -> Workflow:
        workflow, _ = workflow_import(data=definition)
        return workflow

    def run(self, workflow: Workflow) -> dict[str, Any]:
        run = run_create(workflow=workflow, trigger=RunTrigger.CLI, registry=self.registry)
        context = build_run_context(
            run_id=run.pk,
            run_uuid=str(run.uuid),
            spec=workflow_spec(workflow),
            registry=self.registry,
            limits=self.limits,
        )
        with context:
            run = run_execute(run=run, context=context)
        if run.status != RunStatus.SUCCEEDED:
            raise RuntimeError(f"benchmark run {run.pk} ended {run.status}: {run.error_summary}")
        return run.outputs


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for the baselines' clients, as the engine keeps one per process.

    Building one loads the CA bundle (~30 ms); a baseline paying that per run
    while the engine does not would hide engine overhead.
    """
    return httpx.create_ssl_context()


def _limits(parallel: int) -> Limits:
    return Limits(
        max_response_bytes=settings.FLOWPILOT_MAX_RESPONSE_BYTES,
        max_stored_output_bytes=settings.FLOWPILOT_MAX_STORED_OUTPUT_BYTES,
        max_parallel_steps=parallel,
    )


def bench_chain(base_url: str, *, n: int, repeat: int) -> Row:
    runner = EngineRunner(ToolRegistry([ping_tool(base_url)]), _limits(8))
    workflow = runner.prepare(chain_definition(n))
    last = f"s{n - 1:04d}"

    def engine() -> None:
        got = runner.run(workflow)[last]["n"]
        if got != n:
            raise RuntimeError(f"the chain ended with n={got}, expected {n}")

    def baseline() -> None:
        with httpx.Client(verify=_tls()) as client:
            value = 0
            for _ in range(n):
                response = client.get(f"{base_url}/ping", params={"seq": value})
                response.raise_for_status()
                value = response.json()["n"]

    times = compare(engine, baseline, repeat=repeat)
    overhead_ms = (times.engine - times.baseline) / n * 1000
    return Row(
        f"chain {n} x http",
        times.engine,
        times.baseline,
        per_step_ms=overhead_ms,
        target=f"< {CHAIN_TARGET_MS:g} ms",
        ok=overhead_ms < CHAIN_TARGET_MS,
    )


def bench_fanout(base_url: str, *, n: int, repeat: int, delay_ms: int = FANOUT_DELAY_MS) -> Row:
    parallel = max(20, n)
    runner = EngineRunner(ToolRegistry([ping_tool(base_url)]), _limits(parallel))
    workflow = runner.prepare(fanout_definition(n, delay_ms))

    def baseline() -> None:
        limits = httpx.Limits(max_connections=parallel)
        client = httpx.Client(limits=limits, verify=_tls())
        with client, ThreadPoolExecutor(parallel) as pool:

            def call(seq: int) -> None:
                params = {"seq": seq, "delay_ms": delay_ms}
                client.get(f"{base_url}/ping", params=params).raise_for_status()

            list(pool.map(call, range(n)))

    times = compare(lambda: runner.run(workflow), baseline, repeat=repeat)
    ratio = times.engine / times.baseline
    return Row(
        f"fan-out {n} x {delay_ms} ms",
        times.engine,
        times.baseline,
        target=f"<= {FANOUT_TARGET_RATIO:g}x",
        ok=ratio <= FANOUT_TARGET_RATIO,
    )


def bench_validation(*, n: int, repeat: int) -> list[Row]:
    """``validate_workflow`` and ``build_graph`` on a parsed spec, beside a plain Kahn sort."""
    definition, edges = layered_dag(n)
    spec = WorkflowSpec.model_validate(definition)
    registry = ToolRegistry([ping_tool("http://127.0.0.1:9")])
    ids = [step["id"] for step in definition["steps"]]

    def validate() -> None:
        report = validate_workflow(spec, registry=registry)
        if report.errors:
            raise RuntimeError(f"the generated DAG is invalid: {report.errors[0].message}")

    def baseline() -> None:
        if len(kahn_sort(ids, edges)) != n:
            raise RuntimeError("the generated edges are not a DAG")

    checked = compare(validate, baseline, repeat=repeat)
    built = compare(lambda: build_graph(spec), baseline, repeat=repeat)
    label = f"{n:,}-step DAG"
    return [
        Row(
            f"validate {label}",
            checked.engine,
            checked.baseline,
            ratio=False,
            target=f"< {VALIDATE_TARGET_S:g} s",
            ok=checked.engine < VALIDATE_TARGET_S,
        ),
        Row(f"build graph {label}", built.engine, built.baseline, ratio=False),
    ]


def kahn_sort(ids: Iterable[str], edges: Iterable[tuple[str, str]]) -> list[str]:
    """Plain Kahn: in-degrees, a FIFO of ready nodes. The baseline for graph work."""
    children: dict[str, list[str]] = {node: [] for node in ids}
    pending = dict.fromkeys(children, 0)
    for parent, child in edges:
        children[parent].append(child)
        pending[child] += 1
    ready = deque(node for node, count in pending.items() if count == 0)
    order = []
    while ready:
        node = ready.popleft()
        order.append(node)
        for child in children[node]:
            pending[child] -= 1
            if not pending[child]:
                ready.append(child)
    return order
