"""Retention that runs itself: the daily beat task's body, and its record."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings

from runs.services import run_purge
from schedules.models import RetentionSweep


def retention_sweep(*, now: datetime) -> RetentionSweep:
    """Purge finished runs past each workflow's retention, in batches; record the pass.

    The row is written before the purge starts, so a pass that dies midway still
    shows when it ran (and its error, when the exception reached here).
    """
    sweep = RetentionSweep.objects.create(started_at=now)
    try:
        result = run_purge(
            now=now,
            default_days=settings.FLOWPILOT_RUN_RETENTION_DAYS,
            batch_size=settings.FLOWPILOT_RETENTION_BATCH,
        )
    except Exception as exc:
        sweep.error = f"{type(exc).__name__}: {exc}"[:2000]
        sweep.finished_at = datetime.now(tz=now.tzinfo)
        sweep.save(update_fields=["error", "finished_at"])
        raise
    batch = settings.FLOWPILOT_RETENTION_BATCH
    sweep.removed = result
    sweep.total = sum(result.values())
    sweep.batches = sum(-(-count // batch) for count in result.values())
    sweep.finished_at = datetime.now(tz=now.tzinfo)
    sweep.save(update_fields=["removed", "total", "batches", "finished_at"])
    return sweep
