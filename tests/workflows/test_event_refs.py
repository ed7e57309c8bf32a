"""workflows.event_refs: a trigger's inputs, parsed once and read against the event."""

from __future__ import annotations

import pytest

from workflows.event_refs import (
    CURSOR,
    ITEM,
    EventRef,
    EventRefError,
    parse_event_value,
    resolve_event_value,
)
from workflows.event_refs import EVENT as EVENT_ROOT

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
    assert str(EventRef(EVENT_ROOT, ("outputs", "x", "0"))) == "$event.outputs.x.0"
    assert str(EventRef(ITEM)) == "$item"


ITEM_VALUE = {"id": 17, "customer": {"email": "a@example.com"}, "tags": ["x", "y"]}


@pytest.mark.parametrize(
    ("value", "resolved"),
    [
        ("$item", ITEM_VALUE),
        ("$item.id", 17),
        ("$item.customer.email", "a@example.com"),
        ("$item.tags.-1", "y"),
        ("$item.absent", None),
        ({"ids": ["$item.id"], "n": 3}, {"ids": [17], "n": 3}),
        ({"$literal": "$item"}, "$item"),
    ],
)
def test_a_poll_input_reads_the_item(value, resolved):
    assert resolve_event_value(parse_event_value(value, ITEM), ITEM_VALUE) == resolved


def test_a_poll_argument_reads_the_cursor():
    parsed = parse_event_value({"since": "$cursor", "page": "$cursor.page"}, CURSOR)
    assert resolve_event_value(parsed, {"page": 2}) == {"since": {"page": 2}, "page": 2}
    assert resolve_event_value(parsed, None) == {"since": None, "page": None}


@pytest.mark.parametrize(
    ("value", "root", "says"),
    [
        ("$event.run_id", ITEM, "is not a `\\$item` reference: a poll trigger's inputs read"),
        ("$item.id", EVENT_ROOT, "is not an event reference"),
        ("$item.id", CURSOR, "a poll's tool arguments read `\\$cursor`"),
        ("$item..id", ITEM, "empty segment"),
        ("$items", ITEM, "is not a `\\$item` reference"),
    ],
)
def test_a_reference_of_another_place_is_refused_naming_what_is_read_there(value, root, says):
    with pytest.raises(EventRefError, match=says):
        parse_event_value(value, root)
