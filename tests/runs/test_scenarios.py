"""runs.scenarios: a workflow's test scenarios (``tests:``) played offline against a
validation run's recordings; a new version whose output breaks an expectation fails
its scenario before anyone approves it.

The workflow is the offline example (``sales_report``: built-in tools, its data file);
its first version is approved the real way (a validation run), the second is stored
pending review.
"""

from __future__ import annotations

import copy
import json

import pytest

from review.services import workflow_approve
from runs.models import Run, ScenarioResult
from runs.scenarios import expectation_failure, scenario_results, scenario_source, scenarios_run
from tests.factories import pending_version, sales_report_data
from workflows.models import Workflow, WorkflowStatus
from workflows.schema import Expectation
from workflows.services import workflow_import

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("output_dir")]

# What the shipped examples/data/sales.csv totals to.
ROWS_READ = 40


def with_scenarios(**changes) -> dict:
    data = sales_report_data(**changes)
    data["tests"] = [
        {
            "name": "totals",
            "description": "the shipped sales file, summed by region",
            "expect": [
                {"output": "rows_read", "equals": ROWS_READ},
                {"output": "total_revenue", "jmespath": "value > `1000`"},
                {"output": "report", "schema": {"type": "string", "pattern": "\\.html$"}},
            ],
        },
        {
            "name": "top_three",
            "inputs": {"top": 3},
            "expect": [
                {
                    "jmespath": "inputs.top == `3` && outputs.rows_read == `40`",
                    "message": "three products, every row read",
                }
            ],
        },
    ]
    return data


def approved_v1(approver) -> Workflow:
    version = pending_version(with_scenarios())
    approval = workflow_approve(version=version, approved_by=approver, sample_inputs={})
    assert approval.status == "passed", approval.validation_run.error_summary
    version.refresh_from_db()
    return version


def results(version: Workflow) -> dict[str, ScenarioResult]:
    return {r.scenario: r for r in scenario_results(version=version)}


def test_the_scenarios_of_an_approved_version_pass_against_its_validation_run(approver):
    version = approved_v1(approver)

    found = scenarios_run(version=version)

    assert [(r.scenario, r.status, r.failures) for r in found] == [
        ("totals", "passed", []),
        ("top_three", "passed", []),
    ]
    top = results(version)["top_three"]
    assert top.validation_run == scenario_source(version)
    replay = Run.objects.get(pk=top.run_id)
    assert (replay.trigger, replay.inputs["top"], replay.replay_of_id) == (
        "replay",
        3,
        top.validation_run_id,
    )


def test_a_new_version_that_breaks_an_expectation_fails_before_approval(approver):
    v1 = approved_v1(approver)
    data = with_scenarios()
    by_region = next(s for s in data["steps"] if s["id"] == "by_region")
    by_region["input_mapping"]["sum"] = "units"  # revenue now counts units: a regression

    v2, created = workflow_import(data=data, status=WorkflowStatus.PENDING_REVIEW)

    assert created
    assert v2.status == "pending_review"  # nobody approved it
    found = results(v2)  # run when it was stored (FLOWPILOT_VERSION_STORED_HOOKS)
    assert found["totals"].status == "failed"
    (failure,) = found["totals"].failures
    assert failure.startswith("`value > `1000`` is false for output `total_revenue`")
    assert found["top_three"].status == "passed"
    assert found["totals"].validation_run == scenario_source(v1)  # v1's recordings


def test_without_any_validation_run_the_scenarios_are_skipped_saying_why():
    version = pending_version(with_scenarios())

    found = results(version)

    assert {r.status for r in found.values()} == {"skipped"}
    assert (
        "no validation run of `sales_report` recorded its calls yet"
        in (found["totals"].failures[0])
    )


def test_a_scenario_whose_replay_fails_is_an_error_naming_why(approver):
    approved_v1(approver)
    data = with_scenarios()
    data["tests"][0]["inputs"] = {"csv_path": "data/no_such.csv"}

    v2, _ = workflow_import(data=data, status=WorkflowStatus.PENDING_REVIEW)

    totals = results(v2)["totals"]
    assert totals.status == "error"
    assert totals.failures[0].startswith("the replay run ended failed: ")
    assert "no_such.csv" in totals.failures[0]


def test_a_version_without_scenarios_runs_nothing():
    version = pending_version()

    assert scenarios_run(version=version) == []
    assert not ScenarioResult.objects.exists()


OUTPUTS = {"rows_read": 24, "total_revenue": 5123.5, "report": "out/sales.html", "rows": [1, 2]}


@pytest.mark.parametrize(
    ("expectation", "failure"),
    [
        ({"output": "rows_read", "equals": 24}, None),
        ({"output": "rows_read", "equals": 25}, "output `rows_read` is 24, expected 25"),
        ({"output": "missing", "equals": 1}, "output `missing` is missing"),
        ({"output": "rows.1", "equals": 2}, None),
        ({"output": "rows.5", "equals": None}, "output `rows.5` is missing"),
        ({"equals": OUTPUTS}, None),
        (
            {"output": "report", "schema": {"type": "integer"}},
            "output `report`: 'out/sales.html' is not of type 'integer'",
        ),
        ({"schema": {"required": ["cost"]}}, "the outputs: 'cost' is a required property"),
        ({"output": "rows", "jmespath": "length(value) == `2`"}, None),
        ({"jmespath": "outputs.rows_read > inputs.floor"}, None),
        ({"jmespath": "outputs.rows"}, None),  # a non-empty list is true
        ({"jmespath": "outputs.nothing"}, "`outputs.nothing` is null for the outputs"),
        ({"output": "rows", "jmespath": "value[?@ > `5`]"}, "`value[?@ > `5`]` is [] for output"),
        (
            {"jmespath": "outputs.total_revenue < `100`", "message": "revenue stays small"},
            "revenue stays small (`outputs.total_revenue < `100`` is false for the outputs)",
        ),
        ({"jmespath": "abs(outputs.report)"}, "transform `abs(outputs.report)` failed"),
    ],
)
def test_each_kind_of_expectation(expectation, failure):
    found = expectation_failure(
        Expectation.model_validate(expectation), outputs=OUTPUTS, inputs={"floor": 10}
    )
    if failure is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(failure), found


def test_a_workflow_without_tests_stores_no_tests_key_so_its_hash_is_kept():
    data = sales_report_data()
    plain, _ = workflow_import(data=copy.deepcopy(data))
    assert "tests" not in json.dumps(plain.definition)


@pytest.mark.parametrize(
    ("expectation", "failure"),
    [
        ({"output": "rows_read"}, "the expectation names no single check"),
        ({"output": "rows_read", "equals": 24, "jmespath": "value"}, "the expectation names no"),
        ({"output": "flag", "equals": 1}, "output `flag` is true, expected 1"),
        ({"output": "zero", "equals": False}, "output `zero` is 0, expected false"),
        ({"output": "zero", "equals": 0.0}, None),
        ({"output": "rows", "equals": [1, True]}, "output `rows` is [1, 2], expected [1, true]"),
        (
            {"output": "rows", "schema": {"$ref": "#/$defs/missing"}},
            "the schema cannot be applied: ",
        ),
    ],
)
def test_refused_expectations_never_pass_and_equality_is_json(expectation, failure):
    outputs = {**OUTPUTS, "flag": True, "zero": 0}
    found = expectation_failure(Expectation.model_validate(expectation), outputs=outputs, inputs={})
    if failure is None:
        assert found is None
    else:
        assert found is not None
        assert found.startswith(failure), found
