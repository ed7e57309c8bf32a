"""``testflow``: a version's test scenarios run offline from the command line, each
with its result and why; exit 1 when one fails, errs or could not run."""

from __future__ import annotations

import json

import pytest

from tests.factories import pending_version
from tests.runs.test_scenarios import approved_v1, with_scenarios
from workflows.models import WorkflowStatus
from workflows.services import workflow_import

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("output_dir")]


def test_testflow_runs_the_scenarios_and_says_how_each_went(cli, approver):
    approved_v1(approver)

    result = cli("testflow", "sales_report")

    assert result.code == 0, result.out + result.err
    assert result.lines == [
        "  passed   totals",
        "  passed   top_three",
        "sales_report v1: 2 of 2 test scenario(s) passed",
    ]


def test_testflow_exits_1_naming_each_unmet_expectation(cli, approver):
    approved_v1(approver)
    data = with_scenarios()
    data["tests"][0]["expect"][0]["equals"] = 41
    workflow_import(data=data, status=WorkflowStatus.PENDING_REVIEW)

    result = cli("testflow", "sales_report", "--scenario", "totals")
    as_json = json.loads(cli("testflow", "sales_report", "--json").out)

    assert result.code == 1
    assert result.lines[:2] == [
        "  failed   totals",
        "             output `rows_read` is 40, expected 41",
    ]
    assert "sales_report v2: 0 of 1 test scenario(s) passed" in result.err
    assert [(r["scenario"], r["status"]) for r in as_json] == [
        ("totals", "failed"),
        ("top_three", "passed"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("sales_report", "--scenario", "nope"), "has no scenario nope; it has totals, top_three"),
        (("sales_report", "--validation-run", "999"), "run 999 is not a validation run of"),
        (("nothing_here",), "no stored workflow `nothing_here`"),
    ],
)
def test_testflow_refuses_what_it_cannot_run(cli, args, message):
    pending_version(with_scenarios())

    result = cli("testflow", *args)

    assert result.code == 1
    assert message in result.err


def test_a_version_without_scenarios_or_recordings(cli):
    pending_version()
    assert "declares no test scenarios" in cli("testflow", "sales_report").err

    pending_version(with_scenarios())
    skipped = cli("testflow", "sales_report")
    assert skipped.code == 1
    assert skipped.lines[0] == "  skipped  totals"
