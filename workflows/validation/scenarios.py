"""Checks of a workflow's test scenarios (``tests:``): each is run later, offline, against
a validation run's recordings (``runs.scenarios``); what can be wrong with one is found
here, before any run.

- ``scenario_name_duplicate``: two scenarios share a name (results are kept by name);
- ``scenario_input_unknown``: a scenario sets an input the workflow does not declare;
- ``scenario_output_unknown``: an expectation reads an output the workflow does not
  declare (checked when it declares ``outputs``);
- ``scenario_expectation_invalid``: an expectation that names none or several of
  ``equals``, ``schema`` and ``jmespath``, a ``schema`` that is no JSON Schema, or a
  ``jmespath`` that does not compile.
"""

from __future__ import annotations

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from workflows.schema import Expectation, TestScenario
from workflows.transform import TransformError, compile_transform
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error, names, suggest


def check_scenarios(ctx: FlowContext) -> list[ValidationIssue]:
    issues: list[ValidationIssue] = []
    seen: set[str] = set()
    for index, scenario in enumerate(ctx.spec.tests):
        at = f"tests[{index}]"
        if scenario.name in seen:
            message = f"two test scenarios are named `{scenario.name}`; name each once"
            issues.append(error("scenario_name_duplicate", f"{at}.name", message))
        seen.add(scenario.name)
        issues += _inputs(ctx, scenario, at)
        for number, expectation in enumerate(scenario.expect):
            where = f"{at}.expect[{number}]"
            issues += _expectation(ctx, scenario, expectation, where)
    return issues


def _inputs(ctx: FlowContext, scenario: TestScenario, at: str) -> list[ValidationIssue]:
    declared = ctx.spec.inputs
    return [
        error(
            "scenario_input_unknown",
            f"{at}.inputs.{name}",
            f"test scenario `{scenario.name}` sets input `{name}`, which the workflow does "
            f"not declare{suggest(name, declared)}; declared inputs: {names(declared)}",
        )
        for name in scenario.inputs
        if name not in declared
    ]


def _expectation(
    ctx: FlowContext, scenario: TestScenario, expectation: Expectation, where: str
) -> list[ValidationIssue]:
    who = f"test scenario `{scenario.name}`"
    kind = expectation.kind()
    if kind is None:
        message = (
            f"{who}: an expectation says what it checks with exactly one of `equals`, "
            "`schema` (a JSON Schema) and `jmespath` (an expression that must be true)"
        )
        return [error("scenario_expectation_invalid", where, message)]
    issues: list[ValidationIssue] = []
    if expectation.output is not None and ctx.spec.outputs:
        first = expectation.output.split(".", 1)[0]
        if first not in ctx.spec.outputs:
            message = (
                f"{who} reads output `{first}`, which the workflow does not declare"
                f"{suggest(first, ctx.spec.outputs)}; its outputs: {names(ctx.spec.outputs)}"
            )
            issues.append(error("scenario_output_unknown", f"{where}.output", message))
    if kind == "schema":
        try:
            Draft202012Validator.check_schema(expectation.json_schema or {})
        except SchemaError as exc:
            message = f"{who}: `schema` is not a valid JSON Schema: {exc.message}"
            issues.append(error("scenario_expectation_invalid", f"{where}.schema", message))
    if kind == "jmespath":
        try:
            compile_transform(expectation.jmespath or "")
        except TransformError as exc:
            message = f"{who}: `jmespath` does not compile: {exc.message}"
            issues.append(error("scenario_expectation_invalid", f"{where}.jmespath", message))
    return issues
