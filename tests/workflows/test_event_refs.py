"""workflows.event_refs: a trigger's inputs, parsed once and read against the event."""

from __future__ import annotations

import pytest

from workflows.event_refs import (
    EventRef,
    EventRefError,
    parse_event_value,
    resolve_event_value,
)

EVENT = {
    "run_id": 7,
    "run_uuid": "6f1c2a9e-0b7d-4c55-9a61-2d3e4f5a6b7c",
    "workflow": "export",
    "version": 3,
    "status": "succeeded",
    "outputs": {"rows": [{"id": "a"}, {"id": "b"}], "total": 2},
    "error": "",
    "finished_at": "2026-11-28T02:00:00+00:00",
}


@pytest.mark.parametrize(
    ("value", "resolved"),
    [
        ("$event.outputs.total", 2),
        ("$event.outputs.rows.-1.id", "b"),
        ("$event.outputs", EVENT["outputs"]),
        ("$event.run_id", 7),
        ("$event.outputs.missing.deep", None),
        ("plain text with $event inside", "plain text with $event inside"),
        ({"$literal": "$event.run_id"}, "$event.run_id"),
        ({"a": ["$event.status", 1, None]}, {"a": ["succeeded", 1, None]}),
        (42, 42),
    ],
)
def test_a_value_reads_the_event(value, resolved):
    assert resolve_event_value(parse_event_value(value), EVENT) == resolved


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("$input.rows", "is not an event reference"),
        ("$event", "names no field"),
        ("$event.nothing", "the event has no field `nothing`"),
        ("$event.status.deep", "`status` is a single value"),
        ("$event.outputs..x", "empty segment"),
        ("$event.outputs.a b", "a segment uses only"),
    ],
)
def test_a_dollar_string_that_is_no_event_reference_is_refused_saying_why(value, says):
    with pytest.raises(EventRefError, match=says):
        parse_event_value(value)


def test_a_reference_reads_as_written():
    assert str(EventRef("outputs", ("x", "0"))) == "$event.outputs.x.0"
