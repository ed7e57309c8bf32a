"""workflows.loops (iteration references, restart points) and the validation of `loop`
steps: the bound, the condition, the references, the child's inputs, the outputs."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.workflows.test_validator import CREDENTIALS, REGISTRY, WORKFLOWS
from workflows.loops import LoopReferenceError, parse_loop_reference, restart_point
from workflows.schema import LoopStep, WorkflowSpec
from workflows.validator import validate_workflow

PREVIOUS = {"text": "hi!", "items": [{"n": 1}, {"n": 2}], "ok": False}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("$loop.previous", PREVIOUS),
        ("$loop.previous.text", "hi!"),
        ("$loop.previous.ok", False),
        ("$loop.previous.items.1.n", 2),
        ("$loop.previous.items.-1.n", 2),
        ("$loop.previous.items.7.n", None),
        ("$loop.previous.text.x", None),
        ("$loop.previous.missing", None),
        ("$loop.iteration", 4),
    ],
)
def test_a_loop_reference_resolves_against_the_previous_outputs(value, expected):
    assert parse_loop_reference(value).resolve(previous=PREVIOUS, iteration=4) == expected


def test_on_the_first_iteration_previous_is_null():
    assert parse_loop_reference("$loop.previous.text").resolve(previous=None, iteration=1) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("$loop.prev", "is not a loop reference"),
        ("geo.lat", "map run inputs and step outputs in input_mapping"),
        ("$loop.previous.", "empty or invalid key ``"),
        ("$loop.previous.a b", "invalid key `a b`"),
        (3, "`3` is not a loop reference"),
    ],
)
def test_a_bad_loop_reference_is_named(value, message):
    with pytest.raises(LoopReferenceError) as caught:
        parse_loop_reference(value)
    assert message in caught.value.message


def test_restart_points():
    assert restart_point("review") == restart_point("review")
    assert (restart_point("review").step, restart_point("review").iteration) == ("review", None)
    point = restart_point("review#12")
    assert (point.step, point.iteration, str(point)) == ("review", 12, "review#12")
    for bad in ("review#0", "review#", "#2", "Review#2", "review#2#3", "review#-1"):
        with pytest.raises(LoopReferenceError, match="is not a restart point"):
            restart_point(bad)


def _loop(**changes) -> dict:
    return {
        "id": "again",
        "kind": "loop",
        "workflow": "weather_at",
        "max_iterations": 3,
        "until": "output.temperature > 20 or iteration >= 2",
        "input_mapping": {"city": "$input.city"},
        "iteration_mapping": {"days": "$loop.iteration"},
        **changes,
    }


def _validate(*steps: dict):
    flow = {"name": "looping", "inputs": {"city": {}}, "steps": list(steps)}
    return validate_workflow(flow, registry=REGISTRY, workflows=WORKFLOWS, credentials=CREDENTIALS)


def _issues(report) -> dict[tuple[str, str], str]:
    return {(i.code, i.path): i.message for i in report.issues}


def test_a_well_formed_loop_validates_and_later_steps_read_its_outputs():
    after = {
        "id": "after",
        "kind": "transform",
        "expression": "{t: t, n: n, ok: ok}",
        "input_mapping": {
            "t": "again.last.temperature",
            "n": "again.count",
            "ok": "again.condition_held",
        },
    }
    report = _validate(_loop(), after)
    assert report.issues == (), [i.message for i in report.issues]


def test_max_iterations_is_required_and_bounded_by_the_schema():
    for changes in ({"max_iterations": 0}, {"max_iterations": 1001}):
        with pytest.raises(ValidationError):
            LoopStep.model_validate(_loop(**changes))
    unbounded = _loop()
    del unbounded["max_iterations"]
    with pytest.raises(ValidationError, match="max_iterations"):
        LoopStep.model_validate(unbounded)
    (issue,) = _validate(unbounded).issues
    assert (issue.code, issue.path) == ("schema_invalid", "steps[0].max_iterations")


def test_the_operator_maximum_bounds_max_iterations(settings):
    settings.FLOWPILOT_MAX_LOOP_ITERATIONS = 2
    message = _issues(_validate(_loop()))[("loop_iterations_over_limit", "steps[0].max_iterations")]
    assert "sets max_iterations to 3, over the operator maximum of 2" in message


def test_the_condition_is_checked_like_a_decision_condition():
    issues = _issues(_validate(_loop(until="temperature > 20")))
    message = issues[("condition_invalid", "steps[0].until")]
    assert "unknown name `temperature`" in message
    assert "`output.passed == true`" in message
    issues = _issues(_validate(_loop(until='output.temperature > "warm" and len(3)')))
    assert ("condition_invalid", "steps[0].until") in issues


def test_the_iteration_mapping_names_child_inputs_and_loop_references():
    issues = _issues(_validate(_loop(iteration_mapping={"dayz": "$loop.iteration"})))
    assert (
        "declares no input `dayz` (did you mean `days`?)"
        in issues[("unknown_workflow_input", "steps[0].iteration_mapping.dayz")]
    )
    issues = _issues(_validate(_loop(iteration_mapping={"days": "$input.days"})))
    assert ("loop_reference_invalid", "steps[0].iteration_mapping.days") in issues
    issues = _issues(
        _validate(_loop(input_mapping={}, iteration_mapping={"city": "$loop.previous.city"}))
    )
    assert (
        "only in its iteration_mapping, which is null on the first iteration"
        in issues[("missing_workflow_input", "steps[0].iteration_mapping.city")]
    )


def test_an_unknown_output_field_of_the_loop_is_named():
    after = {
        "id": "after",
        "kind": "transform",
        "expression": "{t: t}",
        "input_mapping": {"t": "again.temperature"},
    }
    message = _issues(_validate(_loop(), after))[
        ("unknown_output_field", "steps[1].input_mapping.t")
    ]
    assert "outputs only `condition_held`, `count`, `iterations`, `last`" in message


def test_a_loop_that_runs_its_own_workflow_is_recursion():
    flow = {"name": "weather_at", "inputs": {"city": {}}, "steps": [_loop()]}
    report = validate_workflow(
        flow, registry=REGISTRY, workflows=WORKFLOWS, credentials=CREDENTIALS
    )
    assert "workflow_recursion" in {i.code for i in report.issues}


def test_a_loop_step_round_trips_through_the_file_form():
    spec = WorkflowSpec.model_validate({"name": "looping", "steps": [_loop()]})
    assert WorkflowSpec.model_validate(spec.to_data()) == spec
    step = spec.step("again")
    assert step.called_workflow() == "weather_at"
    assert step.step_time_limit() is None
    assert step.output_field_schema("count") == {"type": "integer"}
    assert step.output_field_schema("last") is None
