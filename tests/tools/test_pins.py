"""tools.pins: a tool definition's hash, its history of revisions, and — for a version's
pins — which tools changed since approval and what a person would call the change."""

from __future__ import annotations

import pytest

from tests.tools.conftest import make_spec
from tools.models import ToolRevision
from tools.pins import tool_definition_hash, tool_pin_changes, tool_pins_for, tool_revision_record
from tools.registry import ToolRegistry

pytestmark = pytest.mark.django_db


def test_the_hash_ignores_the_lifecycle_but_not_what_a_call_does():
    spec = make_spec("/a", name="geo")
    deprecated = spec.model_copy(update={"deprecated": True, "replacement": "geo2"})
    assert tool_definition_hash(deprecated) == tool_definition_hash(spec)
    assert tool_definition_hash(make_spec("/b", name="geo")) != tool_definition_hash(spec)


def test_a_revision_is_recorded_only_when_the_definition_changes():
    first = tool_revision_record(spec=make_spec("/a", name="geo"), source="tools/geo.yaml")
    assert tool_revision_record(spec=make_spec("/a", name="geo")) == first
    assert ToolRevision.objects.filter(tool_name="geo").count() == 1
    tool_revision_record(spec=make_spec("/b", name="geo"))
    assert ToolRevision.objects.filter(tool_name="geo").count() == 2


def test_pins_cover_the_named_tools_the_registry_has():
    registry = ToolRegistry([make_spec("/a", name="geo"), make_spec("/w", name="weather")])
    pins = tool_pins_for(names=["weather", "geo", "geo", "gone"], registry=registry)
    assert sorted(pins) == ["geo", "weather"]
    assert pins["geo"] == tool_definition_hash(registry.get("geo"))


def test_each_change_since_approval_is_named_by_what_a_person_reads():
    before = ToolRegistry(
        [make_spec("/a", name="geo"), make_spec("/w", name="weather"), make_spec(name="mail")]
    )
    pins = tool_pins_for(names=["geo", "weather", "mail", "old"], registry=before)
    pins["old"] = "0" * 64
    after = ToolRegistry(
        [
            make_spec("/a2", name="geo", auth={"type": "bearer", "token": "{{env.T}}"}),
            make_spec("/w", name="weather", extract={"temp": "t"}),
            make_spec(name="mail", headers={"X-Trace": "1"}),
        ]
    )
    assert tool_pin_changes(pins=pins, registry=after) == [
        ("geo", "its URL, auth changed"),
        ("mail", "its definition changed (other settings)"),
        ("old", "the tool was removed"),
        ("weather", "its outputs changed"),
    ]
    assert tool_pin_changes(pins=tool_pins_for(names=["geo"], registry=after), registry=after) == []


def test_a_change_from_a_definition_the_history_lacks_is_still_reported():
    registry = ToolRegistry([make_spec("/a", name="geo")])
    changes = tool_pin_changes(pins={"geo": "f" * 64}, registry=registry)
    assert changes == [("geo", "its definition changed")]
