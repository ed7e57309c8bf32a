"""Resolving a step's mapping (``runs.engine.resolve``): the values a call receives and
the record the checkpoint stores, built in one pass."""

from __future__ import annotations

import pytest

from runs.engine.build import build_run_context
from runs.engine.resolve import resolve_mapping, resolve_step_call
from workflows.schema import WorkflowSpec

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("example_tools")]

TOKEN = "ghp-0123456789"
MAPPING = {
    "owner": "$input.o",
    "repo": {"parts": ["$input.r", "literal", "$env.GITHUB_TOKEN", {"up": "first.deep"}]},
    "absent": "$input.unset",
    "skipped": "gone.value",
}


def test_the_record_is_what_resolving_with_a_record_gives_and_the_values_are_unscrubbed():
    spec = WorkflowSpec.model_validate(
        {"name": "probe", "steps": [
            {"id": "first", "kind": "transform", "expression": "x"},
            {"id": "gone", "kind": "transform", "expression": "x"},
            {"id": "r", "kind": "tool", "tool": "github_repo", "input_mapping": MAPPING},
        ]}
    )  # fmt: skip
    inputs = {"o": f"owner {TOKEN}", "r": ["repo", {"k": TOKEN}]}
    views = {"first": {"deep": {"token": TOKEN, "n": 1}}, "gone": None}
    with build_run_context(run_id=1, spec=spec, env={"GITHUB_TOKEN": TOKEN}) as ctx:
        step = spec.steps[2]
        args, record = resolve_step_call(ctx, step, inputs=inputs, step_value=views.get)
        expected = resolve_mapping(
            ctx.parsed[step.id], inputs=inputs, step_value=views.get, env=ctx.env,
            redactor=ctx.redactor,
        )  # fmt: skip

    assert (args, record) == expected
    assert args["owner"] == f"owner {TOKEN}"  # a step receives exactly what it maps
    assert args["repo"]["parts"][2] == TOKEN
    assert "absent" not in args  # null: left out of the call
    assert "skipped" not in args
    assert record["owner"] == "owner ***"
    assert record["repo"]["parts"] == [
        ["repo", {"k": "***"}], "literal", "$env.GITHUB_TOKEN", {"up": {"token": "***", "n": 1}}
    ]
    assert (record["absent"], record["skipped"]) == (None, None)
