"""The Celery application. Settings come from Django settings under the CELERY_ namespace.

Database connections live across tasks: ``CELERY_DB_REUSE_MAX`` keeps Celery's Django
fixup from closing them around every task, and the ``task_prerun``/``task_postrun``
hooks below do for a task what Django does for a request: close a connection that is
older than ``CONN_MAX_AGE`` or unusable (and arm ``CONN_HEALTH_CHECKS`` for its next
use). Tasks run eagerly (in the caller's process and transaction) are left alone.
"""

from __future__ import annotations

import os
from logging.config import dictConfig
from typing import Any

from celery import Celery, Task
from celery.signals import setup_logging, task_postrun, task_prerun, worker_process_shutdown
from django.conf import settings
from django.db import close_old_connections

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("flowpilot")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@setup_logging.connect
def _config_loggers(*args: Any, **kwargs: Any) -> None:
    dictConfig(settings.LOGGING)


@task_prerun.connect
@task_postrun.connect
def _recycle_old_connections(sender: Task | None = None, **kwargs: Any) -> None:
    """``CONN_MAX_AGE`` and ``CONN_HEALTH_CHECKS`` around a task, as around a request."""
    if sender is not None and getattr(sender.request, "is_eager", False):
        return
    close_old_connections()


@worker_process_shutdown.connect
def _send_telemetry(**kwargs: Any) -> None:
    """A pool process leaves without running exit handlers: the spans and OTLP metrics it
    still buffers are sent first, for at most two seconds each (runs/engine/tracing.py,
    runs/engine/metrics.py)."""
    from runs.engine.metrics import flush_metrics
    from runs.engine.tracing import flush_traces

    flush_traces(timeout_millis=2000)
    flush_metrics(timeout_millis=2000)
