"""The difference from the validation run, step by step."""

import pytest

from notifications.report import json_type, step_diff
from runs.models import StepResult


@pytest.mark.parametrize(
    ("value", "name"),
    [({}, "object"), ([], "array"), ("x", "string"), (1, "number"), (1.5, "number"),
     (True, "boolean"), (None, "null")],
)  # fmt: skip
def test_json_type(value, name):
    assert json_type(value) == name


def test_the_diff_names_status_keys_and_changed_shapes():
    now = StepResult(step_id="s", status="failed", output={"items": "oops", "new": 1}, run_id=2)
    then = StepResult(
        step_id="s", status="succeeded", output={"items": [1], "gone": True}, run_id=1
    )

    diff = step_diff(now, then)

    assert diff["validation_run"] == 1
    assert diff["status"] == {"validation": "succeeded", "now": "failed"}
    assert diff["keys_missing"] == ["gone"]
    assert diff["keys_new"] == ["new"]
    assert diff["shape_changed"] == {"items": {"validation": "array", "now": "string"}}


def test_without_a_validation_run_the_diff_says_so():
    diff = step_diff(StepResult(step_id="s", status="failed"), None)
    assert diff["validation_run"] is None
