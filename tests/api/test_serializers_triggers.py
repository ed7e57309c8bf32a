"""api.serializers.triggers: what an on_workflow trigger waits for, and none for a poll."""

from __future__ import annotations

import pytest

from api.serializers.triggers import EventTriggerSerializer
from triggers.models import EventTrigger

pytestmark = pytest.mark.django_db


def test_the_statuses_of_an_on_workflow_trigger_and_none_for_a_poll():
    waits = EventTrigger(workflow_name="r", position=0, kind="on_workflow", source="n",
                         statuses="failed,succeeded")  # fmt: skip
    polls = EventTrigger(workflow_name="r", position=1, kind="poll", source="t", statuses="")
    assert EventTriggerSerializer(waits).data["statuses"] == ["failed", "succeeded"]
    assert EventTriggerSerializer(polls).data["statuses"] == []
