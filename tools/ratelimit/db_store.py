"""Pacing state in the database (a ``tools.RateLimitSlot`` row per key), for installations
without a Redis broker.

A reservation reads the key's row and writes its new time with an UPDATE conditional on
the time it read (compare and set): of two workers reserving at once, the second UPDATE
matches no row and that worker reads again. No explicit locks, which keeps SQLite (one
writer at a time) and PostgreSQL on the same code. A pause only ever moves later.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from functools import wraps
from typing import Any, TypeVar

from django.db import DatabaseError, IntegrityError, connections, router, transaction
from django.db.models import Q

from tools.models import RateLimitSlot
from tools.ratelimit.hints import PauseHints

ROUNDS = 50  # compare-and-set rounds before a reservation gives up (a crowd of workers)

F = TypeVar("F", bound=Callable[..., Any])


def _thread_connection_closed(method: F) -> F:
    """Close the calling thread's connection after ``method`` unless it is the main thread
    (a Celery worker keeps its one connection across tasks). An in-process run calls
    from its step threads, whose first statement opens a connection of their own: left
    open, every run would leave one behind per step thread."""

    @wraps(method)
    def closing(*args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        finally:
            if threading.current_thread() is not threading.main_thread():
                connection = connections[router.db_for_write(RateLimitSlot)]
                if not connection.in_atomic_block:
                    connection.close()

    return closing  # type: ignore[return-value]


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


class DatabasePaceStore:
    """See the module doc. Its only state is the process's pause hints."""

    errors: tuple[type[Exception], ...] = (DatabaseError,)

    def __init__(self) -> None:
        self.hints = PauseHints()

    @_thread_connection_closed
    def reserve(
        self, key: str, *, now: float, interval: float, tolerance: float, max_wait: float
    ) -> float:
        now_ms = _ms(now)
        for _ in range(ROUNDS):
            row = RateLimitSlot.objects.filter(key=key).values_list("tat_ms", "paused_until_ms")
            found = row.first()
            if found is None:
                self._create(key)
                continue
            stored, paused = found
            tat = max(stored, now_ms)
            slot = max(now_ms, tat - _ms(tolerance), paused or 0)
            wait = slot - now_ms
            if wait > _ms(max_wait):
                return wait / 1000
            new_tat = max(tat, slot) + _ms(interval)
            if RateLimitSlot.objects.filter(key=key, tat_ms=stored).update(tat_ms=new_tat):
                return wait / 1000
        raise DatabaseError(f"rate limit {key!r}: no slot reserved after {ROUNDS} rounds")

    @_thread_connection_closed
    def pause(self, key: str, *, until: float) -> None:
        until_ms = _ms(until)
        self._create(key)
        RateLimitSlot.objects.filter(key=key).filter(
            Q(paused_until_ms__isnull=True) | Q(paused_until_ms__lt=until_ms)
        ).update(paused_until_ms=until_ms)
        self.hints.add(key, until)

    @_thread_connection_closed
    def paused_until(self, key: str) -> float | None:
        value = (
            RateLimitSlot.objects.filter(key=key).values_list("paused_until_ms", flat=True).first()
        )
        return None if value is None else value / 1000

    def known_pauses(self, *, now: float, refresh: float) -> Mapping[str, float]:
        return self.hints.get(now=now, refresh=refresh, read=self._read_pauses)

    @staticmethod
    @_thread_connection_closed
    def _read_pauses(now: float) -> dict[str, float]:
        rows = RateLimitSlot.objects.filter(paused_until_ms__gt=_ms(now))
        found = rows.values_list("key", "paused_until_ms")
        return {key: until / 1000 for key, until in found if until is not None}

    def reset(self, keys: list[str] | None = None) -> None:
        """Forget the pacing of ``keys`` (None: of every key)."""
        rows = RateLimitSlot.objects.all()
        (rows if keys is None else rows.filter(key__in=keys)).delete()
        self.hints = PauseHints()

    def close(self) -> None:
        """Nothing to release: the database connection belongs to Django."""

    @staticmethod
    def _create(key: str) -> None:
        if RateLimitSlot.objects.filter(key=key).exists():
            return
        try:
            with transaction.atomic():
                RateLimitSlot.objects.create(key=key)
        except IntegrityError:
            pass  # another worker created it first
