"""A run's view of the database breaker store: healthy hosts cost its step threads nothing.

In process, a run's tool calls happen on its step threads. With the breakers in the
database, every call used to read its host's row from the calling thread — and a
thread's first statement opens a database connection of its own, so every run paid
for a new connection per step thread (about 10 ms on PostgreSQL) and left it open
when the thread ended. ``KnownHosts`` keeps the set of hosts that have a row (a
breaker that counted a failure or is open), read by the run's coordinating thread
at the start and then every ``REFRESH_SECONDS``:

- a call to a host not in the set is admitted as ``CLEAN`` without a statement (a
  healthy host has no row), and its success writes nothing;
- a call to a host in the set goes to the store as before (admit, trial, record);
- a failure is recorded in the store and its host joins the set at once, so this
  run's next call to it reads the row.

A breaker another process opens is seen by this run within ``REFRESH_SECONDS``.
The rare statements a step thread does make (an unhealthy host) are followed by
closing that thread's connection, so a run leaves no connection behind. The Celery
step task uses the store directly (its worker's one connection is kept across tasks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar

from django.db import connections, router

from tools.breaker.core import CLEAN, Admission, BreakerPolicy, BreakerState, CircuitBreakers
from tools.breaker.db_store import DatabaseBreakerStore
from tools.models import Breaker

_T = TypeVar("_T")

REFRESH_SECONDS = 1.0


class KnownHosts:
    """See the module doc. ``refresh()`` belongs to the coordinating thread; the rest
    is called from step threads."""

    def __init__(self, store: DatabaseBreakerStore) -> None:
        self.store = store
        self.errors = store.errors
        self._hosts: frozenset[str] = frozenset()
        self._lock = threading.Lock()
        self._owner = threading.get_ident()

    def refresh(self) -> None:
        hosts = self.store.hosts()
        with self._lock:
            self._hosts = hosts

    def admit(self, host: str, *, now: datetime, policy: BreakerPolicy) -> Admission:
        if host not in self._hosts:
            return CLEAN
        return self._stored(self.store.admit, host, now=now, policy=policy)

    def record_failure(self, host: str, *, now: datetime, policy: BreakerPolicy) -> bool:
        with self._lock:
            self._hosts = self._hosts | {host}
        return self._stored(self.store.record_failure, host, now=now, policy=policy)

    def record_success(self, host: str) -> None:
        self._stored(self.store.record_success, host)

    def states(self) -> list[BreakerState]:
        return self.store.states()

    def reset(self, hosts: list[str] | None) -> int:
        return self.store.reset(hosts)

    def close(self) -> None:
        self.store.close()

    def _stored(self, method: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        try:
            return method(*args, **kwargs)
        finally:
            if threading.get_ident() != self._owner:
                _close_thread_connection()


def _close_thread_connection() -> None:
    """Close this step thread's connection (opened for the statement just made)."""
    connection = connections[router.db_for_write(Breaker)]
    if not connection.in_atomic_block:
        connection.close()


def in_process_view(breakers: CircuitBreakers | None) -> CircuitBreakers | None:
    """The breakers a run's step threads use in process: on the database store, a
    ``KnownHosts`` view (read now, by the calling coordinating thread); else as given."""
    if breakers is None or not isinstance(breakers.store, DatabaseBreakerStore):
        return breakers
    view = replace(breakers, store=KnownHosts(breakers.store))
    view.refresh()
    return view
