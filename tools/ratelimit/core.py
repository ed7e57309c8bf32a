"""The pacer: reserve a call's slot under its rate limit, wait for it, share a pause.

One algorithm for every store: GCRA with reservations (the "generic cell rate
algorithm" of ATM networks, the one behind most API gateways). A key keeps one time,
its theoretical arrival time ``tat``; a call reserves the slot
``max(now, tat - tolerance, paused_until)`` and moves ``tat`` one ``interval``
(``per / requests``) past it, atomically in the shared store. So every caller, in every
worker, gets its own slot: calls go out evenly spaced (``burst - 1`` of them may go at
once after an idle spell, the ``tolerance``), nobody polls, and a crowd of waiters does
not wake at once and race for one free place. Why not a window limiter (the ``limits``
library's fixed, moving or sliding windows): a window lets its whole quota through at
once at every boundary, which an API counting in a slightly shifted window answers with
429s, and a refused caller can only poll; see docs/limits.md.

What a call does with its slot (``Pacer.admit``):

- no wait: it goes at once;
- a wait up to ``max_sleep`` seconds: it sleeps in place, and the wait is recorded on
  its request (``rate_limit_wait``);
- a longer wait: nothing is reserved and :class:`~tools.errors.RateLimitWait` is raised,
  a told wait: the step is tried again after it (on Celery, re-queued with that
  countdown, so no worker slot is held while waiting), or after ``max_pause`` when
  the wait is longer still (then it asks again).

Adaptive pacing (``Pacer.observe``): an answer whose headers say the quota is used up
(``tools.ratelimit.headers``) pauses its key in the store until the reset, and every
caller of that key, in every worker, waits for it. A tool without ``rate_limit`` is
keyed by its host. Its calls cost nothing while no pause exists: the store keeps the
keys paused right now, which each process re-reads at most every ``refresh`` seconds
(``known_pauses``); only a key in that set is read from the store before a call. The
trade-off: a pause another worker records is seen here within ``refresh`` seconds; a
call made in between may get the API's own 429, whose ``Retry-After`` it honours.

The stores fail open, like the circuit breaker: when the store is unavailable the call
goes through, and a warning is logged.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from tools.errors import RateLimitWait
from tools.ratelimit.config import RateLimitConfig

logger = logging.getLogger("flowpilot.tools")

T = TypeVar("T")
MAX_KEY_CHARS = 200  # a longer key (a long input value) is stored by its hash


class PaceStore(Protocol):
    """The shared pacing state. Every method is atomic across processes; ``errors``
    are the exceptions that mean the store itself is unavailable. Times are Unix
    seconds from the caller's clock."""

    errors: tuple[type[Exception], ...]

    def reserve(
        self, key: str, *, now: float, interval: float, tolerance: float, max_wait: float
    ) -> float:
        """Reserve ``key``'s next slot; the seconds until it. A slot farther than
        ``max_wait`` is not reserved: its distance is returned (the caller re-queues)."""
        ...

    def pause(self, key: str, *, until: float) -> None:
        """Hold every call of ``key`` until ``until`` (a later pause wins)."""
        ...

    def paused_until(self, key: str) -> float | None:
        """When ``key``'s pause ends, if it has one."""
        ...

    def known_pauses(self, *, now: float, refresh: float) -> Mapping[str, float]:
        """The keys paused at ``now`` (key -> end), as this process last read them: re-read
        from the store when the last read is older than ``refresh`` seconds."""
        ...

    def close(self) -> None: ...


def stored_key(key: str) -> str:
    """``key`` as the store keeps it: itself, or past ``MAX_KEY_CHARS`` a hash."""
    if len(key) <= MAX_KEY_CHARS:
        return key
    return key[:64] + "#" + hashlib.sha256(key.encode()).hexdigest()


@dataclass
class Pacer:
    """Rate limits and pauses as one run (or process) applies them: the shared store,
    the waits it may sleep in place, the clock. Built by the caller
    (``tools.ratelimit.setup.pacer_from_settings``) and passed on ``ToolCallContext``."""

    store: PaceStore
    max_sleep: float = 5.0
    max_pause: float = 3600.0
    refresh: float = 1.0
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep

    def admit(self, key: str, limit: RateLimitConfig | None) -> float:
        """Wait for ``key``'s slot (under ``limit``, or only its pause without one); the
        seconds slept. Raises ``RateLimitWait`` when the wait is longer than
        ``max_sleep`` (nothing was reserved, nothing sent)."""
        key = stored_key(key)
        now = self.clock()
        if limit is None:
            wait = self._pause_wait(key, now)
        else:
            tolerance = ((limit.burst or 1) - 1) * limit.interval
            reserved = self._store_call(
                key, self.store.reserve, key, now=now, interval=limit.interval,
                tolerance=tolerance, max_wait=self.max_sleep,
            )  # fmt: skip
            wait = reserved or 0.0
        if wait <= 0:
            return 0.0
        if wait > self.max_sleep:
            # At most max_pause: a step re-queued for a day would sit in the broker.
            raise RateLimitWait(key=key, retry_after=min(wait, self.max_pause))
        self.sleep(wait)
        return wait

    def _pause_wait(self, key: str, now: float) -> float:
        """The wait a key without a limit owes a pause: no store read unless this
        process knows the key is paused (``known_pauses``)."""
        known = self._store_call(key, self.store.known_pauses, now=now, refresh=self.refresh)
        if not known or key not in known:
            return 0.0
        until = self._store_call(key, self.store.paused_until, key)
        return 0.0 if until is None else until - now

    def observe(self, key: str, seconds: float | None) -> None:
        """Pause ``key`` for ``seconds`` (what an answer's headers said; None: no pause),
        capped by ``max_pause``: every caller of the key waits for it."""
        if seconds is None or seconds <= 0:
            return
        key = stored_key(key)
        until = self.clock() + min(seconds, self.max_pause)
        self._store_call(key, self.store.pause, key, until=until)

    def _store_call(
        self, key: str, method: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T | None:
        try:
            return method(*args, **kwargs)
        except self.store.errors as exc:
            logger.warning(
                "rate limit store unavailable for %s, the call goes through: %s: %s",
                key, type(exc).__name__, exc,
            )  # fmt: skip
            return None

    def close(self) -> None:
        self.store.close()
