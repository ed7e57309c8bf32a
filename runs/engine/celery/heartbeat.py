"""Lease renewal for running Celery steps: one thread per worker process, started lazily.

A step task registers its claim while its attempt runs (``heartbeat``). Most attempts
finish well within a second, so nothing is renewed for them: the claim's first renewal
is due ``FIRST_BEAT`` seconds (or a third of the lease, if shorter) after the attempt
started, the next ones every third of the lease. The renewing thread is started on
the first registration in a process and then kept (a prefork child runs one task at a
time, so it renews at most one claim there); it opens its own database connection only
when something is due, and closes it when no claim is left, so an idle worker holds
none for it.

The renewal is conditional on the claim (``claim_token`` and ``running``), so a step
the sweeper took back is left alone. A failed renewal is logged and tried again on a
new connection at the next beat; the lease (``FLOWPILOT_STEP_LEASE``) is three beats
long, so one lost beat never lets the sweeper take a live step back.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import DatabaseError, connection

from runs.engine.context import DEFAULT_CLOCK, Clock
from runs.engine.db_retry import reconnect
from runs.models import StepResult
from runs.state import StepStatus

logger = logging.getLogger("flowpilot.engine")

FIRST_BEAT = 1.0  # seconds: attempts shorter than this never renew their lease


@dataclass
class _Claim:
    token: str
    lease: float
    now: Clock
    due: float  # time.monotonic() of the next renewal


class Heartbeats:
    """The claims of this process that are running, and the thread renewing them."""

    def __init__(self) -> None:
        self._claims: dict[int, _Claim] = {}
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self.renewals = 0  # how many UPDATEs were sent (tests read it)

    def add(self, step_result_id: int, token: str, *, lease: float, now: Clock) -> None:
        first = min(FIRST_BEAT, lease / 3)
        with self._wake:
            self._claims[step_result_id] = _Claim(token, lease, now, time.monotonic() + first)
            self._ensure_thread()
            self._wake.notify()

    def remove(self, step_result_id: int) -> None:
        with self._wake:
            self._claims.pop(step_result_id, None)
            self._wake.notify()

    def _ensure_thread(self) -> None:
        """Start the thread once per process (a forked child starts its own)."""
        if self._thread is not None and self._thread.is_alive() and self._pid == os.getpid():
            return
        self._pid = os.getpid()
        self._thread = threading.Thread(target=self._loop, name="lease-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._wake:
                due = self._due_claims()
                if not due:
                    self._wait()
                    continue
            for step_result_id, claim in due:
                self._renew(step_result_id, claim)

    def _due_claims(self) -> list[tuple[int, _Claim]]:
        at = time.monotonic()
        due = [(pk, claim) for pk, claim in sorted(self._claims.items()) if claim.due <= at]
        for _, claim in due:
            claim.due = at + claim.lease / 3
        return due

    def _wait(self) -> None:
        """Sleep until the next renewal is due, or until a claim comes or goes."""
        if not self._claims:
            connection.close()  # nothing to renew: hold no connection while idle
            self._wake.wait()
            return
        nearest = min(claim.due for claim in self._claims.values())
        self._wake.wait(max(0.0, nearest - time.monotonic()))

    def _renew(self, step_result_id: int, claim: _Claim) -> None:
        with self._wake:
            if self._claims.get(step_result_id) is not claim:
                return  # settled meanwhile
        try:
            StepResult.objects.filter(
                pk=step_result_id, claim_token=claim.token, status=StepStatus.RUNNING
            ).update(lease_expires_at=claim.now() + timedelta(seconds=claim.lease))
            self.renewals += 1
        except DatabaseError:
            logger.warning("heartbeat of step result %s failed", step_result_id)
            reconnect()  # the next beat opens a new connection
        except Exception:  # never let the thread die: every claim of the process needs it
            logger.exception("heartbeat of step result %s failed", step_result_id)
            reconnect()


HEARTBEATS = Heartbeats()


@contextmanager
def heartbeat(
    step_result_id: int, token: str, *, lease: float | None = None, now: Clock = DEFAULT_CLOCK
) -> Iterator[None]:
    """Renew the step's lease while the body runs, once it has run ``FIRST_BEAT`` s."""
    HEARTBEATS.add(step_result_id, token, lease=lease or settings.FLOWPILOT_STEP_LEASE, now=now)
    try:
        yield
    finally:
        HEARTBEATS.remove(step_result_id)
