"""What a process knows of the keys paused right now, re-read at most every few seconds.

Both stores keep the paused keys where one read lists them; a :class:`PauseHints` (one
per store, so one per process for the process's shared store) keeps the last read and
its time, so a call to a key without a limit costs no store round trip while nothing is
paused. A pause this process records joins the hints at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping


class PauseHints:
    """See the module doc. Thread-safe: a run's step threads share it."""

    def __init__(self) -> None:
        self._known: dict[str, float] = {}
        self._read_at: float | None = None
        self._lock = threading.Lock()

    def get(
        self, *, now: float, refresh: float, read: Callable[[float], Mapping[str, float]]
    ) -> Mapping[str, float]:
        """The keys paused at ``now``; ``read(now)`` is called when the last read is older
        than ``refresh`` seconds (or there was none)."""
        with self._lock:
            stale = self._read_at is None or now - self._read_at >= refresh
        if stale:
            fresh = dict(read(now))
            with self._lock:
                self._known, self._read_at = fresh, now
        with self._lock:
            return {key: until for key, until in self._known.items() if until > now}

    def add(self, key: str, until: float) -> None:
        with self._lock:
            self._known[key] = max(until, self._known.get(key, 0.0))
