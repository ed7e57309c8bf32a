"""The tools app's Celery task: beat reads the tool sources that are due again
(``tools.sources``, every ``FLOWPILOT_SOURCE_REFRESH_CHECK_MINUTES``)."""

from __future__ import annotations

from celery import shared_task

REFRESH_SOURCES_TASK = "tools.refresh_sources"


@shared_task(name=REFRESH_SOURCES_TASK, ignore_result=True)
def refresh_sources() -> dict[str, int]:
    """Read the due tool sources again; how many were read and how many failed."""
    from tools.source_refresh import sources_refresh

    results = sources_refresh(due=True)
    return {"read": sum(r.ok for r in results), "failed": sum(not r.ok for r in results)}
