"""workflows.validation.reference_checks: every reference reads something that exists —
a declared input, a field the step outputs, `$item` inside a foreach — `$env` never reaches
outputs, `.error` needs `on_error: continue`, and unused inputs are warned about."""

from __future__ import annotations

from tools.registry import ToolRegistry
from workflows.validator import validate_workflow


def shape(step_id: str, **mapping) -> dict:
    """A transform whose output is ``{total: <its first mapped name>}``."""
    mapping = mapping or {"a": 1}
    expression = f"{{total: {next(iter(mapping))}}}"
    return {"id": step_id, "kind": "transform", "expression": expression, "input_mapping": mapping}


def found(data: dict) -> dict[tuple[str, str], str]:
    report = validate_workflow({"name": "r", **data}, registry=ToolRegistry([]))
    return {(i.code, i.path): i.message for i in report.issues}


def test_reads_of_what_exists_are_fine():
    data = {
        "inputs": {"n": {"type": "integer"}},
        "steps": [shape("a", a="$input.n"), shape("b", v="a.total")],
    }
    assert found(data) == {}


def test_an_unknown_input_is_named_with_a_suggestion():
    issues = found(
        {"inputs": {"city": {}}, "steps": [shape("a", a="$input.cty"), shape("b", c="$input.city")]}
    )
    assert "(did you mean `city`?)" in issues[("unknown_input", "steps[0].input_mapping.a")]


def test_a_field_the_step_does_not_output_is_named_with_what_it_does():
    message = found({"steps": [shape("a"), shape("b", v="a.totl")]})[
        ("unknown_output_field", "steps[1].input_mapping.v")
    ]
    assert "`total`" in message


def test_item_outside_a_foreach_and_env_in_outputs_are_refused():
    issues = found({"steps": [shape("a", a="$item.x")], "outputs": {"key": "$env.API_KEY"}})
    assert ("item_outside_foreach", "steps[0].input_mapping.a") in issues
    assert ("env_in_output", "outputs.key") in issues


def test_reading_an_error_needs_on_error_continue():
    issues = found({"steps": [shape("a"), shape("b", v="a.error")]})
    assert ("error_ref_without_continue", "steps[1].input_mapping.v") in issues
    continued = {**shape("a"), "on_error": "continue"}
    assert ("error_ref_without_continue", "steps[1].input_mapping.v") not in found(
        {"steps": [continued, shape("b", v="a.error")]}
    )


def test_an_input_never_read_is_a_warning():
    assert found({"inputs": {"spare": {}}, "steps": [shape("a")]})[
        ("unused_input", "inputs.spare")
    ] == ("input `spare` is declared but never read")


def test_a_path_into_a_transform_key_follows_what_its_expression_builds():
    count = {
        "id": "a",
        "kind": "transform",
        "expression": "{n: length(rows), pair: {first: rows[0]}, names: rows[*].name}",
        "input_mapping": {"rows": [1, 2]},
    }
    issues = found(
        {"steps": [count, shape("b", v="a.n.x"), shape("c", v="a.pair.second"),
                   shape("d", v="a.pair.first.x", w="a.names.0")]}
    )  # fmt: skip
    assert issues[("unknown_output_field", "steps[1].input_mapping.v")] == (
        "step `b` reads `a.n.x`, but `a.n` is an integer, with no field `x`: read `a.n` itself"
    )
    assert issues[("unknown_output_field", "steps[2].input_mapping.v")] == (
        "step `c` reads `a.pair.second`, but the expression of transform step `a` "
        "(`{n: length(rows), pair: {first: rows[0]}, names: rows[*]....`) declares only "
        "`first`"
    )  # a long expression is cut
    assert ("unknown_output_field", "steps[3].input_mapping.v") not in issues  # data decides
    assert ("unknown_output_field", "steps[3].input_mapping.w") not in issues
