"""One timer thread per process for every request's deadline.

The transport bounds a whole exchange (connect, headers and the whole body) by
shutting the connection's socket down when its deadline passes. Starting a
``threading.Timer`` for that costs a thread per request (~0.1 ms, as much as the
rest of a loopback call's own overhead); this module keeps one daemon thread that
sleeps until the earliest deadline instead. ``Deadlines.schedule`` returns a
handle whose ``cancel()`` is a flag (no lock, no wake-up): a cancelled entry is
dropped when it reaches the head of the heap, or when cancelled entries outnumber
live ones. It holds no run's data, only callbacks and times; a process that forks
(a Celery prefork child) starts its own thread on first use.

Callbacks run on the timer thread and must be short (the transport's shuts a socket
down); one that raises is logged and the thread goes on.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger("flowpilot.tools")


@dataclass(order=True)
class Deadline:
    """A scheduled callback; ``cancel()`` before it fires and it never will."""

    at: float
    seq: int
    callback: Callable[[], None] = field(compare=False)
    cancelled: bool = field(default=False, compare=False)

    def cancel(self) -> None:
        self.cancelled = True


class Deadlines:
    """The callbacks due at monotonic times, fired by one lazily started thread."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._heap: list[Deadline] = []
        self._wake = threading.Condition(threading.Lock())
        self._seq = itertools.count()
        self._owner_pid: int | None = None

    def schedule(self, seconds: float, callback: Callable[[], None]) -> Deadline:
        entry = Deadline(self._clock() + max(seconds, 0.0), next(self._seq), callback)
        with self._wake:
            self._ensure_thread()
            heapq.heappush(self._heap, entry)
            if self._heap[0] is entry:
                self._wake.notify()
            elif len(self._heap) > 64:
                self._compact()
        return entry

    def pending(self) -> int:
        """Entries not yet fired nor cancelled (for tests and diagnostics)."""
        with self._wake:
            return sum(1 for entry in self._heap if not entry.cancelled)

    def after_fork_in_child(self) -> None:
        """A forked child has no timer thread and none of the parent's requests: start
        empty, with a fresh lock (the parent's may have been held at the fork)."""
        self._heap = []
        self._wake = threading.Condition(threading.Lock())
        self._owner_pid = None

    def _ensure_thread(self) -> None:
        if self._owner_pid == os.getpid():
            return
        self._owner_pid = os.getpid()
        threading.Thread(target=self._run, name="flowpilot-deadlines", daemon=True).start()

    def _compact(self) -> None:
        live = [entry for entry in self._heap if not entry.cancelled]
        if len(live) * 2 < len(self._heap):
            heapq.heapify(live)
            self._heap = live

    def _run(self) -> None:
        pid = os.getpid()
        while True:
            with self._wake:
                if self._owner_pid != pid:
                    return
                due = self._next_due()
            if due is not None and not due.cancelled:
                try:
                    due.callback()
                except Exception:
                    logger.exception("a request deadline's callback failed")

    def _next_due(self) -> Deadline | None:
        """Wait (holding the condition) until the earliest live entry is due; pop it."""
        while True:
            while self._heap and self._heap[0].cancelled:
                heapq.heappop(self._heap)
            if not self._heap:
                self._wake.wait()
                continue
            delay = self._heap[0].at - self._clock()
            if delay <= 0:
                return heapq.heappop(self._heap)
            self._wake.wait(delay)


DEADLINES = Deadlines()
os.register_at_fork(after_in_child=DEADLINES.after_fork_in_child)
