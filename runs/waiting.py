"""Waiting for a run to finish: the read behind the API's long poll."""

from __future__ import annotations

import time
from collections.abc import Callable

from runs.models import RUN_TERMINAL, Run, RunStatus


def run_wait(
    *,
    run_id: int,
    timeout: float,
    interval: float = 0.25,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[Run, bool]:
    """Read run ``run_id`` until it is finished, waits for a person (an approval step:
    nothing happens until someone decides), or ``timeout`` seconds have passed.

    Returns ``(run, finished)``; the run as last read. Raises ``Run.DoesNotExist``.
    The caller bounds ``timeout``: a request thread is held for as long as it lasts.
    """
    deadline = clock() + max(0.0, timeout)
    while True:
        run = Run.objects.select_related("workflow").get(pk=run_id)
        if run.status in RUN_TERMINAL or run.status == RunStatus.WAITING:
            return run, run.status in RUN_TERMINAL
        left = deadline - clock()
        if left <= 0:
            return run, False
        sleep(min(interval, left))
