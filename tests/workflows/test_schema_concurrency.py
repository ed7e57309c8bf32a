"""The ``concurrency`` block: its structure, hostile values named by field and path, the
validator's cross-check of its key, its place in the definition hash, its description."""

from __future__ import annotations

from typing import Any

import pytest

from workflows.schema import WorkflowSpec
from workflows.schema_concurrency import Concurrency
from workflows.validator import validate_workflow


def flow(**concurrency: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "limited",
        "inputs": {"account": {"type": "string"}},
        "steps": [
            {
                "id": "echo",
                "kind": "transform",
                "expression": "@",
                "input_mapping": {"account": "$input.account"},
            }
        ],
    }
    if concurrency:
        data["concurrency"] = concurrency
    return data


def issues(data: dict[str, Any]) -> list[tuple[str, str, str]]:
    report = validate_workflow(data, registry=None)
    return [(i.code, i.path, i.message) for i in report.issues]


@pytest.mark.parametrize(
    ("concurrency", "path", "fragment"),
    [
        ({"max_runs": 0}, "concurrency.max_runs", "greater than or equal to 1 (got 0)"),
        ({"max_runs": -3}, "concurrency.max_runs", "greater than or equal to 1"),
        ({"max_runs": 10**9}, "concurrency.max_runs", "less than or equal to 10000"),
        ({"max_runs": "many"}, "concurrency.max_runs", "valid integer"),
        ({"max_runs": 2.5}, "concurrency.max_runs", "valid integer"),
        ({"max_runs": True}, "concurrency.max_runs", "valid integer"),
        ({}, "concurrency.max_runs", "required"),
        ({"max_runs": 1, "on_limit": "wait"}, "concurrency.on_limit", "'queue', 'skip' or 'fail'"),
        ({"max_runs": 1, "key": "account"}, "concurrency.key", "must be `$input.<name>`"),
        ({"max_runs": 1, "key": "$input.a.b"}, "concurrency.key", "must be `$input.<name>`"),
        ({"max_runs": 1, "key": "$env.SECRET"}, "concurrency.key", "must be `$input.<name>`"),
        ({"max_runs": 1, "key": 5}, "concurrency.key", "valid string"),
        ({"max_runs": 1, "limit": 2}, "concurrency.limit", "did you mean `on_limit`?"),
    ],
)
def test_hostile_values_are_errors_naming_the_field_and_its_path(concurrency, path, fragment):
    data = flow()
    data["concurrency"] = concurrency

    found = issues(data)

    assert [(code, where) for code, where, _ in found] == [("schema_invalid", path)]
    assert fragment in found[0][2]


def test_a_block_that_is_not_a_mapping_is_an_error_at_its_path():
    data = {**flow(), "concurrency": 3}

    assert [(c, p) for c, p, _ in issues(data)] == [("schema_invalid", "concurrency")]


def test_a_key_naming_an_undeclared_input_is_unknown_input_at_concurrency_key():
    found = issues(flow(max_runs=3, key="$input.acount"))

    assert found == [
        (
            "unknown_input",
            "concurrency.key",
            "concurrency key `$input.acount` reads input `acount`, which is not declared "
            "(did you mean `account`?); declared inputs: `account`",
        )
    ]


def test_an_input_read_only_by_the_key_is_not_unused():
    data = flow(max_runs=3, key="$input.tenant")
    data["inputs"]["tenant"] = {"type": "string"}

    assert issues(data) == []


@pytest.mark.parametrize("key", [None, "none", "None"])
def test_no_key_is_one_pool_for_the_workflow(key):
    limit = Concurrency.model_validate({"max_runs": 2, "key": key})

    assert limit.key is None
    assert limit.key_input is None
    assert limit.on_limit == "queue"


def test_the_limit_is_part_of_the_definition_hash():
    plain = WorkflowSpec.model_validate(flow())
    limited = WorkflowSpec.model_validate(flow(max_runs=3, key="$input.account"))
    raised = WorkflowSpec.model_validate(flow(max_runs=4, key="$input.account"))

    hashes = {plain.definition_hash(), limited.definition_hash(), raised.definition_hash()}

    assert len(hashes) == 3
    assert limited.to_data()["concurrency"] == {"max_runs": 3, "key": "$input.account"}
    assert "concurrency" not in plain.to_data()  # an old version's hash is unchanged


@pytest.mark.parametrize(
    ("limit", "text"),
    [
        (
            {"max_runs": 3, "key": "$input.account"},
            "at most 3 runs at once per `account`; further runs queue and start, oldest "
            "first, as slots free",
        ),
        (
            {"max_runs": 1, "on_limit": "skip"},
            "at most 1 run at once; further runs are skipped (recorded, never started)",
        ),
        (
            {"max_runs": 1000, "on_limit": "fail"},
            "at most 1,000 runs at once; further runs fail at once, naming the limit",
        ),
    ],
)
def test_describe_says_what_the_limit_implies(limit, text):
    assert Concurrency.model_validate(limit).describe() == text
