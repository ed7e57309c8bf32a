"""workflows.validation.scenarios: test scenarios checked before any run (the golden
files under tests/data/flows/invalid/scenario_*.yaml show each code)."""

from __future__ import annotations

from tests.factories import sales_report_data
from workflows.validator import validate_workflow


def report_of(tests: list[dict], **changes):
    data = sales_report_data(**changes)
    data["tests"] = tests
    return validate_workflow(data, registry=None)


def test_a_well_formed_scenario_passes_every_check():
    report = report_of(
        [
            {
                "name": "totals",
                "inputs": {"top": 3},
                "expect": [
                    {"output": "rows_read", "equals": None},  # null is a value to expect
                    {"output": "report", "schema": {"type": "string"}},
                    {"jmespath": "outputs.rows_read > `0`"},
                ],
            }
        ]
    )
    assert report.issues == ()


def test_outputs_are_checked_only_when_the_workflow_declares_them():
    undeclared = report_of(
        [{"name": "a", "expect": [{"output": "anything", "equals": 1}]}], outputs={}
    )
    declared = report_of([{"name": "a", "expect": [{"output": "anything.deep", "equals": 1}]}])

    assert undeclared.issues == ()
    assert [(i.code, i.path) for i in declared.issues] == [
        ("scenario_output_unknown", "tests[0].expect[0].output")
    ]


def test_a_scenario_needs_a_name_and_an_expectation():
    report = report_of([{"name": "Bad Name", "expect": []}])
    assert {i.code for i in report.issues} == {"schema_invalid"}
