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


def test_each_revision_is_the_next_version_bumped_by_what_changed():
    tool_revision_record(spec=make_spec("/a", name="geo"))
    tool_revision_record(spec=make_spec("/a", name="geo", idempotent=False))  # compatible
    tool_revision_record(spec=make_spec("/b", name="geo", idempotent=False))  # another path
    tool_revision_record(spec=make_spec("/b", name="geo", idempotent=False, method="GET"))

    rows = list(ToolRevision.objects.filter(tool_name="geo").order_by("number"))
    assert [(r.number, r.version, r.bump) for r in rows] == [
        (1, "1.0.0", ""),
        (2, "1.1.0", "minor"),
        (3, "2.0.0", "major"),
    ]
    assert rows[0].changes == []
    assert rows[2].changes == [
        {"path": "http.request.url", "what": "what is called: /a → /b", "level": "major"}
    ]
    assert str(rows[2]) == "geo 2.0.0"


def test_a_number_another_process_took_meanwhile_is_not_taken_twice(monkeypatch):
    from tools import pins

    tool_revision_record(spec=make_spec("/a", name="geo"))
    real_fields = pins._version_fields
    raced = []

    def a_rival_records_first(latest, stored):
        fields = real_fields(latest, stored)
        if not raced:  # between this process's read and its insert, under the same number
            raced.append(1)
            rival = {**stored, "description": "the rival's change"}
            ToolRevision.objects.create(
                tool_name="geo", kind="http", hash="f" * 64, spec=rival, **fields
            )
        return fields

    monkeypatch.setattr(pins, "_version_fields", a_rival_records_first)

    tool_revision_record(spec=make_spec("/b", name="geo"))

    rows = list(ToolRevision.objects.filter(tool_name="geo").order_by("number"))
    assert [r.number for r in rows] == [1, 2, 3]
    assert rows[2].hash == tool_definition_hash(make_spec("/b", name="geo"))
    assert [c["path"] for c in rows[2].changes] == ["description"]  # since the rival's


def test_the_migration_numbers_the_revisions_recorded_before_versions():
    from importlib import import_module

    from django.apps import apps
    from django.db.models import F

    migration = import_module("tools.migrations.0009_tool_versions")
    for url in ("/a", "/a2", "/b"):
        tool_revision_record(spec=make_spec(url, name="geo"))
    tool_revision_record(spec=make_spec(name="mail"))
    # As the rows were before: no versions (numbers kept distinct for the constraint).
    ToolRevision.objects.update(number=F("id") + 1000, version="", bump="", changes=[])

    migration.number_revisions(apps, None)

    rows = ToolRevision.objects.order_by("tool_name", "number")
    assert [(r.tool_name, r.number, r.version) for r in rows] == [
        ("geo", 1, "1.0.0"),
        ("geo", 2, "2.0.0"),
        ("geo", 3, "3.0.0"),
        ("mail", 1, "1.0.0"),
    ]


def test_a_version_reference_that_only_looks_like_a_number_is_not_found():
    from tools.pins import VersionNotFound, tool_version_get

    tool_revision_record(spec=make_spec("/a", name="geo"))
    assert tool_version_get(name="geo", ref="1").version == "1.0.0"
    for ref in ("\u00b2", "\uff11", "v9"):  # a superscript two, a full-width one: no numbers
        with pytest.raises(VersionNotFound, match="has no version"):
            tool_version_get(name="geo", ref=ref)
