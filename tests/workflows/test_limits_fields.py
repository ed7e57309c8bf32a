"""The workflow fields of worker routing and parallelism (``queue``, ``max_parallel``, a
foreach step's ``max_parallel``): accepted values, and errors naming the field and path."""

from __future__ import annotations

import pytest

from tests.workflows.test_validator import REGISTRY
from workflows.schema import WorkflowSpec
from workflows.validator import validate_workflow


def flow(**fields) -> dict:
    step = {"id": "geo", "kind": "tool", "tool": "geocode", "input_mapping": {"city": "x"}}
    return {"name": "limits", "steps": [step], **fields}


def each(**fields) -> dict:
    step = {
        "id": "each",
        "kind": "foreach",
        "tool": "geocode",
        "input_mapping": {"items": "$input.cities"},
        "item_mapping": {"city": "$item"},
        **fields,
    }
    return {"name": "limits", "inputs": {"cities": {"type": "array"}}, "steps": [step]}


def issues(data: dict) -> dict[str, str]:
    report = validate_workflow(data, registry=REGISTRY)
    return {issue.path: issue.message for issue in report.errors}


def test_queue_and_max_parallel_are_accepted_and_hashed():
    plain = WorkflowSpec.model_validate(flow())
    routed = WorkflowSpec.model_validate(flow(queue="heavy", max_parallel=5))

    assert issues(flow(queue="heavy", max_parallel=5)) == {}
    assert (routed.queue, routed.max_parallel) == ("heavy", 5)
    assert (plain.queue, plain.max_parallel) == (None, None)
    assert "queue" not in plain.to_data()  # a definition written before keeps its hash
    assert plain.definition_hash() != routed.definition_hash()


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("heavy queue", "letters, digits"),
        ("", "1 to 64"),
        ("celeryev.x", "Celery's own"),
        (7, "string"),
    ],
)
def test_a_bad_workflow_queue_is_reported_at_queue(value, expected):
    found = issues(flow(queue=value))
    assert list(found) == ["queue"]
    assert expected in found["queue"]


@pytest.mark.parametrize("value", [0, -1, 1001, "many", 2.5])
def test_a_bad_workflow_max_parallel_is_reported_at_max_parallel(value):
    found = issues(flow(max_parallel=value))
    assert list(found) == ["max_parallel"]


@pytest.mark.parametrize("value", [0, 101, "all"])
def test_a_bad_foreach_max_parallel_is_reported_at_its_step(value):
    found = issues(each(max_parallel=value))
    assert list(found) == ["steps[0].max_parallel"]


def test_a_foreach_step_takes_max_parallel_or_concurrency_not_both():
    assert issues(each(max_parallel=7)) == {}
    assert WorkflowSpec.model_validate(each(max_parallel=7)).steps[0].items_in_flight == 7
    assert WorkflowSpec.model_validate(each(concurrency=3)).steps[0].items_in_flight == 3
    assert WorkflowSpec.model_validate(each()).steps[0].items_in_flight == 4

    found = issues(each(max_parallel=7, concurrency=3))
    assert list(found) == ["steps[0]"]
    assert "not both" in found["steps[0]"]
    assert "`each`" in found["steps[0]"]
