"""tools.tasks: beat's task reads the due tool sources again and says how it went; its
entry is in the beat schedule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from tools.models import ToolSource
from tools.tasks import REFRESH_SOURCES_TASK, refresh_sources

pytestmark = pytest.mark.django_db


def test_beat_reads_the_due_sources_every_few_minutes():
    entry = settings.CELERY_BEAT_SCHEDULE["flowpilot-refresh-sources"]
    assert entry["task"] == REFRESH_SOURCES_TASK
    assert entry["schedule"] == timedelta(minutes=settings.FLOWPILOT_SOURCE_REFRESH_CHECK_MINUTES)


def test_the_task_reads_only_due_sources_and_counts_failures(tmp_path):
    long_ago = timezone.now() - timedelta(days=3)
    due = ToolSource.objects.create(
        kind="mcp", name="gone", location=str(tmp_path / "gone.yaml"), attempted_at=long_ago,
        refreshed_at=long_ago, tools=["gone_tool"],
    )  # fmt: skip
    ToolSource.objects.create(
        kind="mcp", name="fresh", location=str(tmp_path / "fresh.yaml"),
        attempted_at=timezone.now(), refreshed_at=timezone.now(),
    )  # fmt: skip

    assert refresh_sources() == {"read": 0, "failed": 1}  # the due one's file is gone

    due.refresh_from_db()
    assert not due.available
    assert "is gone" in due.error
    assert ToolSource.objects.get(name="fresh").available  # not due: not read
