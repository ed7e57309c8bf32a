"""api.serializers.tools: a tool's current version, and the diff's ``from`` field (a
Python keyword, so added rather than declared)."""

from __future__ import annotations

import pytest

from api.serializers.tools import ToolDetailSerializer, ToolVersionsDiffSerializer
from tests.tools.conftest import make_spec
from tools.models import Tool
from tools.pins import tool_versions_diff
from tools.services import tool_upsert

pytestmark = pytest.mark.django_db


def test_the_detail_has_the_version_of_the_definition_the_tool_has_now():
    tool_upsert(spec=make_spec("/a", name="geo"), source="geo.yaml")
    tool_upsert(spec=make_spec("/b", name="geo"), source="geo.yaml")

    assert ToolDetailSerializer(Tool.objects.get(name="geo")).data["version"] == "2.0.0"


def test_a_tool_whose_definition_was_never_recorded_or_is_unreadable_has_no_version():
    unrecorded = Tool.objects.create(name="bare", kind="builtin", spec={"name": "bare"})
    broken = Tool.objects.create(name="broken", kind="http", spec={"name": "broken", "http": 3})

    assert ToolDetailSerializer(unrecorded).data["version"] is None
    assert ToolDetailSerializer(broken).data["version"] is None


def test_the_diff_names_its_ends_from_and_to_in_order():
    tool_upsert(spec=make_spec("/a", name="geo"), source="geo.yaml")
    tool_upsert(spec=make_spec("/b", name="geo"), source="geo.yaml")

    data = ToolVersionsDiffSerializer(tool_versions_diff(name="geo", old=1, new=2).as_dict()).data

    assert list(data)[:3] == ["tool", "from", "to"]
    assert data["from"] == {"number": 1, "version": "1.0.0"}
    assert data["to"] == {"number": 2, "version": "2.0.0"}
