"""Lease renewal for running Celery steps: one thread per worker process, started lazily.

A step task registers its claim while its attempt runs (``heartbeat``). Most attempts
finish well within a second, so nothing is renewed for them: the claim's first renewal
is due ``FIRST_BEAT`` seconds after the attempt started, or a third of the lease after
the claim wrote it if that comes first (resolving a step's inputs, or a busy machine,
can take a good part of the lease before the attempt starts), the next ones every third
of the lease. The renewing thread is started on the first registration in a process
and then kept (a prefork child runs one task at a time, so it renews at most one claim
there); it opens its own database connection only when something is due, and closes it
when no claim is left, so an idle worker holds none for it.

The renewal is conditional on the claim (``claim_token`` and ``running``), so a step
the sweeper took back is left alone. A failed renewal (the connection was cut: a
database restart, ``pg_terminate_backend``) is logged and tried again on a new
connection ``RETRY_BEAT`` seconds later, not a whole beat later (the next failures in a
row wait for the beats); the lease (``FLOWPILOT_STEP_LEASE``) is three beats long, so
one lost beat never lets the sweeper take a live step back.
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
RETRY_BEAT = 0.2  # seconds: a failed renewal is tried again this soon (at most a beat)


@dataclass
class _Claim:
    token: str
    lease: float
    now: Clock
    due: float  # time.monotonic() of the next renewal
    failed: int = 0  # renewals failed in a row


class Heartbeats:
    """The claims of this process that are running, and the thread renewing them."""

    def __init__(self) -> None:
        self._claims: dict[int, _Claim] = {}
        self._wake = threading.Condition()
        self._thread: threading.Thread | None = None
        self._pid = 0
        self.renewals = 0  # how many UPDATEs were sent (tests read it)

    def add(
        self,
        step_result_id: int,
        token: str,
        *,
        lease: float,
        now: Clock,
        leased_at: float | None = None,
    ) -> bool:
        """Renew the claim's lease from now on; ``leased_at`` (``time.monotonic()``) is
        when the lease the claim wrote began, if earlier than now. False (nothing done)
        when this claim is renewed already."""
        at = time.monotonic()
        due = at + min(FIRST_BEAT, lease / 3)
        if leased_at is not None:
            due = min(due, leased_at + lease / 3)
        with self._wake:
            held = self._claims.get(step_result_id)
            if held is not None and held.token == token:
                return False
            self._claims[step_result_id] = _Claim(token, lease, now, due)
            self._ensure_thread()
            self._wake.notify()
        return True

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
            claim.failed = 0
        except DatabaseError:
            logger.warning("heartbeat of step result %s failed", step_result_id)
            self._failed(claim)
        except Exception:  # never let the thread die: every claim of the process needs it
            logger.exception("heartbeat of step result %s failed", step_result_id)
            self._failed(claim)

    def _failed(self, claim: _Claim) -> None:
        """Drop the broken connection. The first failure in a row is tried again soon on
        a new one (a cut connection fails the one renewal that finds it cut), not a whole
        beat later; while the database stays away, the beats go on as usual."""
        reconnect()
        with self._wake:
            claim.failed += 1
            if claim.failed == 1:
                claim.due = min(claim.due, time.monotonic() + min(RETRY_BEAT, claim.lease / 3))


HEARTBEATS = Heartbeats()


@contextmanager
def heartbeat(
    step_result_id: int,
    token: str,
    *,
    lease: float | None = None,
    now: Clock = DEFAULT_CLOCK,
    leased_at: float | None = None,
) -> Iterator[None]:
    """Renew the step's lease while the body runs, once it has run ``FIRST_BEAT`` s or a
    third of the lease has passed since ``leased_at`` (the claim's ``time.monotonic()``).
    Nested in a ``heartbeat`` of the same claim, it leaves the renewal to that one."""
    added = HEARTBEATS.add(
        step_result_id, token, lease=lease or settings.FLOWPILOT_STEP_LEASE, now=now,
        leased_at=leased_at,
    )  # fmt: skip
    try:
        yield
    finally:
        if added:
            HEARTBEATS.remove(step_result_id)
