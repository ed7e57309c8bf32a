"""workflows.references: a mapping value parsed once into typed references and literals —
which strings are references, which stay literals, and what a malformed `$` says."""

from __future__ import annotations

import pytest

from workflows.references import (
    EnvRef,
    InputRef,
    ItemRef,
    Literal,
    ReferenceError_,
    StepRef,
    iter_refs,
    looks_like_reference,
    parse_value,
)

STEPS = frozenset({"geo", "weather"})


@pytest.mark.parametrize(
    ("value", "parsed"),
    [
        ("$input.email", InputRef("email")),
        ("$input.user.address.0", InputRef("user", ("address", "0"))),
        ("geo.results.0.lat", StepRef("geo", ("results", "0", "lat"))),
        ("$step.weather", StepRef("weather")),
        ("$step.weather.temperature", StepRef("weather", ("temperature",))),
        ("$env.GITHUB_TOKEN", EnvRef("GITHUB_TOKEN")),
        ("$item", ItemRef()),
        ("$item.url", ItemRef(("url",))),
        ("$index", ItemRef(index=True)),
    ],
)
def test_each_reference_form(value, parsed):
    assert parse_value(value, STEPS) == parsed
    assert str(parsed) == value.replace("$step.weather.", "weather.")


def test_a_dotted_string_is_a_reference_only_when_its_head_is_a_step():
    assert parse_value("api.example.com", STEPS) == Literal("api.example.com")
    assert parse_value("geo", STEPS) == Literal("geo")  # a bare id is a literal
    assert parse_value(42, STEPS) == Literal(42)
    assert parse_value({"$literal": "$input.x"}, STEPS) == Literal("$input.x")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("$step", "must look like `$step.STEP_ID`"),
        ("$step.nowhere", "reads `nowhere`, which is not a step"),
        ("$input", "must look like `$input.NAME`"),
        ("$env.A.B", "must look like `$env.NAME`"),
        ("$env.1A", "must look like `$env.NAME`"),
        ("$price", 'write {"$literal": ...}'),
    ],
)
def test_a_malformed_dollar_says_what_it_should_look_like(value, message):
    with pytest.raises(ReferenceError_) as caught:
        parse_value(value, STEPS)
    assert message in str(caught.value)


def test_containers_are_walked_and_their_references_listed_in_order():
    parsed = parse_value({"a": ["$input.x", "lit", {"b": "geo.lat"}], "c": "$env.K"}, STEPS)
    assert parsed["a"][1] == Literal("lit")
    assert list(iter_refs(parsed)) == [InputRef("x"), StepRef("geo", ("lat",)), EnvRef("K")]


def test_the_shape_of_a_reference_is_read_from_any_dotted_string():
    assert looks_like_reference("gep.lat") == ("gep", ("lat",))
    assert looks_like_reference("plain") is None
    assert looks_like_reference(3) is None
