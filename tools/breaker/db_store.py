"""Breaker state in the database (a ``tools.Breaker`` row per host), for installations
without a Redis broker.

Every change is one conditional UPDATE whose ``WHERE`` names the state it expects, so
two workers can never both take the half-open trial or both apply a transition: the
second UPDATE matches no row. No explicit locks, which keeps SQLite (one writer at a
time) and PostgreSQL on the same code.

A healthy host has no row. Admitting its call is one plain ``SELECT`` of the state
column (a statement written once, not built by the ORM per call: this runs before
every HTTP request) and its success writes nothing (``CLEAN``), so a healthy call
costs one indexed read.
"""

from __future__ import annotations

from datetime import datetime
from functools import cache

from django.db import DatabaseError, IntegrityError, connections, router, transaction
from django.db.models import Case, F, Value, When

from tools.breaker.core import (
    ALLOW,
    CLEAN,
    Admission,
    BreakerPolicy,
    BreakerState,
    seconds,
    state_named,
)
from tools.models import Breaker, BreakerStateChoice
from tools.statements import bound_cursor

OPEN, HALF_OPEN, CLOSED = (
    BreakerStateChoice.OPEN,
    BreakerStateChoice.HALF_OPEN,
    BreakerStateChoice.CLOSED,
)


class DatabaseBreakerStore:
    """See the module doc. Stateless: every call reads and writes the table."""

    errors: tuple[type[Exception], ...] = (DatabaseError,)

    def admit(self, host: str, *, now: datetime, policy: BreakerPolicy) -> Admission:
        state = _stored_state(host)
        if state is None:
            return CLEAN
        if state == CLOSED:
            return ALLOW
        for _ in range(3):  # a lost race re-reads the row; three rounds always settle
            row = Breaker.objects.filter(host=host).first()
            if row is None or row.state == CLOSED:
                return ALLOW
            due = row.retry_at if row.state == OPEN else row.trial_until
            if due is not None and now < due:
                return Admission(allowed=False, retry_at=due)
            # The cool-down (or a lost trial's slot) is over: take the trial if still free.
            taken = (
                Breaker.objects.filter(host=host, state=row.state)
                .filter(**({"retry_at": due} if row.state == OPEN else {"trial_until": due}))
                .update(state=HALF_OPEN, trial_until=now + seconds(policy.cooldown))
            )
            if taken:
                return Admission(allowed=True, trial=True)
        return Admission(allowed=False, retry_at=now + seconds(policy.cooldown))

    def record_failure(self, host: str, *, now: datetime, policy: BreakerPolicy) -> bool:
        self._ensure_row(host)
        rows = Breaker.objects.filter(host=host)
        opening = {
            "state": OPEN,
            "opened_at": now,
            "retry_at": now + seconds(policy.cooldown),
            "trial_until": None,
        }
        counted = {"failures": F("failures") + 1, "last_failure_at": now}
        if rows.filter(state=HALF_OPEN).update(**counted, **opening):
            return True
        cutoff = now - seconds(policy.window)
        restarted = Case(When(last_failure_at__lt=cutoff, then=Value(1)), default=F("failures") + 1)
        if not rows.filter(state=CLOSED).update(failures=restarted, last_failure_at=now):
            rows.filter(state=OPEN).update(**counted)
            return False
        return bool(rows.filter(state=CLOSED, failures__gte=policy.failures).update(**opening))

    def record_success(self, host: str) -> None:
        # Called only when admit found a row (a clean admission's success writes nothing).
        Breaker.objects.filter(host=host).delete()

    def hosts(self) -> frozenset[str]:
        """The hosts that have a row (counted failures, open or half-open): one
        prepared ``SELECT``, read at every in-process run's start."""
        alias = router.db_for_read(Breaker)
        with bound_cursor(connections[alias]) as cursor:
            cursor.execute(_hosts_sql(alias))
            return frozenset(str(row[0]) for row in cursor.fetchall())

    def states(self) -> list[BreakerState]:
        return [
            BreakerState(
                host=row.host,
                state=state_named(row.state),
                failures=row.failures,
                last_failure_at=row.last_failure_at,
                opened_at=row.opened_at,
                retry_at=row.retry_at,
                trial_until=row.trial_until,
            )
            for row in Breaker.objects.order_by("host")
        ]

    def reset(self, hosts: list[str] | None) -> int:
        rows = Breaker.objects.all() if hosts is None else Breaker.objects.filter(host__in=hosts)
        deleted, _ = rows.delete()
        return deleted

    def close(self) -> None:
        """Nothing to release: the database connection belongs to Django."""

    @staticmethod
    def _ensure_row(host: str) -> None:
        if Breaker.objects.filter(host=host).exists():
            return
        try:
            with transaction.atomic():
                Breaker.objects.create(host=host)
        except IntegrityError:
            pass  # another worker created it first


def _stored_state(host: str) -> str | None:
    """The host's stored state, or None when it has no row: one prepared ``SELECT``."""
    alias = router.db_for_read(Breaker)
    with bound_cursor(connections[alias]) as cursor:
        cursor.execute(_state_sql(alias), [host])
        row = cursor.fetchone()
    return None if row is None else str(row[0])


@cache
def _hosts_sql(alias: str) -> str:
    quote = connections[alias].ops.quote_name
    meta = Breaker._meta
    # Only quoted identifiers of our own model.
    return f"SELECT {quote(meta.get_field('host').column)} FROM {quote(meta.db_table)}"  # noqa: S608


@cache
def _state_sql(alias: str) -> str:
    quote = connections[alias].ops.quote_name
    meta = Breaker._meta
    state, host = meta.get_field("state").column, meta.get_field("host").column
    # Only quoted identifiers of our own model are formatted in; the host is a parameter.
    return f"SELECT {quote(state)} FROM {quote(meta.db_table)} WHERE {quote(host)} = %s"  # noqa: S608
