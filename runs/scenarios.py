"""A workflow's test scenarios (``tests:``), run offline against recorded calls.

Each scenario is a replay (``runs.replay``): a run of the version with trigger
``replay``, its inputs the validation run's with the scenario's over them, every tool,
MCP and model call answered from that validation run's recordings (nothing reaches
the network; a call it did not record fails its step with ``replay_unrecorded``).
Then each expectation is checked on the run's outputs:

- ``equals``: the value (the ``output`` named, a dot path into the outputs; else the
  whole outputs) equals it;
- ``schema``: the value is valid against the JSON Schema;
- ``jmespath``: the expression, over ``{outputs, inputs, value}``, is true (JMESPath's
  truth: not false, null, or an empty string, list or object).

The recordings come from the newest succeeded validation run of the version, else of
the newest earlier version of the same name: so a new version pending review is tested
against what its predecessor's validation run recorded, before anyone approves it.
With no such run the scenarios are ``skipped`` (say so, nothing is run).

Every result is stored (``ScenarioResult``: passed, failed with each unmet expectation,
error with why, skipped) for the version's definition hash; the review page, the API and
``testflow`` show the newest per scenario. ``version_stored`` runs them when a version
with scenarios is stored (a ``FLOWPILOT_VERSION_STORED_HOOKS`` hook, after commit).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from jsonschema import Draft202012Validator

from runs.models import Run, RunStatus, ScenarioResult, ScenarioStatus
from runs.services import run_create
from runs.state import RunTrigger
from tools.errors import FlowpilotError
from tools.paths import MISSING, PathError, parse_path, walk
from tools.registry import ToolRegistry
from workflows.models import Workflow
from workflows.schema import Expectation, TestScenario
from workflows.services import workflow_spec
from workflows.transform import TransformError, compile_transform

logger = logging.getLogger("flowpilot.scenarios")

NOT_RUN = "not_run"  # a declared scenario with no stored result yet


def scenario_source(version: Workflow) -> Run | None:
    """The validation run whose recordings answer ``version``'s scenarios: its own
    newest succeeded one, else the newest of an earlier version of the same name."""
    runs = Run.objects.filter(
        trigger=RunTrigger.VALIDATION, status=RunStatus.SUCCEEDED, workflow__name=version.name
    )
    own = runs.filter(workflow=version).order_by("-finished_at", "-pk").first()
    if own is not None:
        return own
    earlier = runs.filter(workflow__version__lt=version.version)
    return earlier.order_by("-workflow__version", "-finished_at", "-pk").first()


def scenarios_run(
    *,
    version: Workflow,
    validation_run: Run | None = None,
    names: Iterable[str] | None = None,
) -> list[ScenarioResult]:
    """Run the version's scenarios (all, or the named ones) and store their results."""
    spec = workflow_spec(version)
    wanted = None if names is None else set(names)
    scenarios = [s for s in spec.tests if wanted is None or s.name in wanted]
    source = validation_run or scenario_source(version)
    registry = ToolRegistry.from_db()
    results = []
    for scenario in scenarios:
        if source is None:
            why = (
                f"no validation run of `{version.name}` recorded its calls yet; approve a "
                "version (its validation run records them), then run `testflow`"
            )
            results.append(_store(version, scenario, ScenarioStatus.SKIPPED, [why], None, None))
            continue
        results.append(_play(version, scenario, source, registry))
    return results


def scenario_results(*, version: Workflow) -> list[ScenarioResult]:
    """The newest result of each of the version's scenarios (for its definition), in the
    order the scenarios are written; a scenario never run is left out."""
    rows = ScenarioResult.objects.filter(
        workflow=version, definition_hash=version.definition_hash
    ).order_by("scenario", "-created_at", "-id")
    newest: dict[str, ScenarioResult] = {}
    for row in rows:
        newest.setdefault(row.scenario, row)
    order = [s.name for s in workflow_spec(version).tests]
    return [newest[name] for name in order if name in newest]


@dataclass(frozen=True)
class ScenarioRow:
    """A declared scenario of a version and its newest result (``not_run`` when none)."""

    name: str
    status: str  # passed, failed, error, skipped, not_run
    failures: tuple[str, ...] = ()
    run_id: int | None = None  # the replay run that played it
    validation_run_id: int | None = None  # whose recordings answered it
    created_at: datetime | None = None


def scenario_rows(*, version: Workflow) -> list[ScenarioRow]:
    """Every scenario the version declares, in order, with its newest result: what the
    review page and the API show."""
    newest = {r.scenario: r for r in scenario_results(version=version)}
    rows = []
    for scenario in workflow_spec(version).tests:
        found = newest.get(scenario.name)
        if found is None:
            rows.append(ScenarioRow(scenario.name, NOT_RUN))
            continue
        rows.append(
            ScenarioRow(
                scenario.name, found.status, tuple(found.failures or []), found.run_id,
                found.validation_run_id, found.created_at,
            )
        )  # fmt: skip
    return rows


def version_stored(*, workflow_id: int) -> None:
    """A version was stored (``FLOWPILOT_VERSION_STORED_HOOKS``): run its scenarios."""
    version = Workflow.objects.filter(pk=workflow_id).first()
    if version is None or not workflow_spec(version).tests:
        return
    results = scenarios_run(version=version)
    counts: dict[str, int] = {}
    for result in results:
        counts[result.status] = counts.get(result.status, 0) + 1
    logger.info("test scenarios of %s: %s", version, counts)


def _play(
    version: Workflow, scenario: TestScenario, source: Run, registry: ToolRegistry
) -> ScenarioResult:
    spec = workflow_spec(version)
    inputs = {k: v for k, v in {**source.inputs, **scenario.inputs}.items() if k in spec.inputs}
    from runs.replay.services import replay_execute  # the replay machinery, on this path only

    try:
        run = run_create(
            workflow=version, trigger=RunTrigger.REPLAY, inputs=inputs, registry=registry,
            replay_of=source,
        )  # fmt: skip
        run = replay_execute(run=run, source=source, registry=registry)
    except FlowpilotError as exc:
        return _store(version, scenario, ScenarioStatus.ERROR, [exc.message], None, source)
    if run.status != RunStatus.SUCCEEDED:
        why = f"the replay run ended {run.status}: {run.error_summary or 'no error recorded'}"
        return _store(version, scenario, ScenarioStatus.ERROR, [why], run, source)
    outputs = run.outputs if isinstance(run.outputs, dict) else {}
    failures = [
        failure
        for expectation in scenario.expect
        if (failure := expectation_failure(expectation, outputs=outputs, inputs=run.inputs))
    ]
    status = ScenarioStatus.FAILED if failures else ScenarioStatus.PASSED
    return _store(version, scenario, status, failures, run, source)


def expectation_failure(
    expectation: Expectation, *, outputs: dict[str, Any], inputs: dict[str, Any]
) -> str | None:
    """Why ``expectation`` is not met by ``outputs``, or None when it is."""
    where = f"output `{expectation.output}`" if expectation.output else "the outputs"
    said = f"{expectation.message} ({{}})" if expectation.message else "{}"
    value: Any = outputs
    if expectation.output:
        try:
            value = walk(outputs, parse_path(expectation.output))
        except PathError as exc:
            return said.format(str(exc))
        if value is MISSING:
            return said.format(f"{where} is missing")
    kind = expectation.kind()
    if kind is None:  # the validator refuses it; a stored file may still hold one
        return said.format("the expectation names no single check: equals, schema or jmespath")
    if kind == "equals" and not json_equal(value, expectation.equals):
        return said.format(f"{where} is {_short(value)}, expected {_short(expectation.equals)}")
    if kind == "schema":
        try:
            errors = sorted(
                Draft202012Validator(expectation.json_schema or {}).iter_errors(value),
                key=lambda e: list(e.absolute_path),
            )
        except Exception as exc:  # noqa: BLE001 - a $ref that resolves nowhere, a bad schema
            return said.format(f"the schema cannot be applied: {type(exc).__name__}: {exc}")
        if errors:
            first = errors[0]
            at = ".".join(str(p) for p in first.absolute_path)
            return said.format(f"{where}{f'.{at}' if at else ''}: {first.message}")
    if kind == "jmespath":
        expression = expectation.jmespath or ""
        try:
            result = compile_transform(expression).apply(
                {"outputs": outputs, "inputs": inputs, "value": value}
            )
        except TransformError as exc:
            return said.format(exc.message)
        if not _true(result):
            return said.format(f"`{expression}` is {_short(result)} for {where}")
    return None


def json_equal(a: Any, b: Any) -> bool:
    """Equality as JSON has it: ``true`` is not ``1`` and ``false`` is not ``0`` (Python's
    ``==`` says they are); ``1`` and ``1.0`` are the same number."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _true(value: Any) -> bool:
    """JMESPath's truth: false, null, and empty strings, lists and objects are false."""
    return not (value is None or value is False or value in ("", [], {}))


def _short(value: Any, limit: int = 120) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _store(
    version: Workflow,
    scenario: TestScenario,
    status: str,
    failures: list[str],
    run: Run | None,
    source: Run | None,
) -> ScenarioResult:
    return ScenarioResult.objects.create(
        workflow=version,
        definition_hash=version.definition_hash,
        scenario=scenario.name,
        status=status,
        failures=[failure[:2000] for failure in failures],
        run=run,
        validation_run=source,
    )
