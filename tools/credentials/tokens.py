"""The current access token of a stored OAuth2 credential, shared by every process, and
the lock that lets exactly one process refresh it at a time.

The token lives sealed in the credential's own ``secrets`` (``access_token``, with a
rotated ``refresh_token``) and its expiry in ``expires_at``: every worker reads the
same row. A refresh takes :func:`refresh_lock` — a Redis lock
(``redis-py``'s ``Lock``) when ``FLOWPILOT_TOKEN_LOCK_REDIS_URL`` is set (by default
the broker's URL when the broker is Redis), else the credential row itself
(``SELECT … FOR UPDATE`` on PostgreSQL; on SQLite, the single-process setup, a lock
in the process) — then re-reads the
row (:meth:`HeldCredential.current`): when another process refreshed meanwhile, its
token is used; else the one token request is made and its answer written in the same
transaction (:meth:`HeldCredential.store`), a rotated refresh token with it, before the
lock is released. Others wait at most ``FLOWPILOT_TOKEN_REFRESH_WAIT`` seconds, then
get :class:`RefreshWaitTimeout` naming the credential. docs/credentials.md.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import DatabaseError, connections, router, transaction
from django.utils import timezone

from tools.credentials.crypto import seal, unseal
from tools.credentials.store import _release_thread_connection, shared_cache_retry
from tools.models import Credential

LOCK_PREFIX = "flowpilot:credential-refresh:"
"""The Redis key of credential NAME's refresh lock is this prefix and NAME."""


class RefreshWaitTimeout(Exception):
    """Another process held credential ``name``'s refresh for longer than the wait."""

    def __init__(self, name: str, wait: float) -> None:
        self.name = name
        self.message = (
            f"credential {name!r}: waited {wait:g} s for another process refreshing its "
            "OAuth2 token (FLOWPILOT_TOKEN_REFRESH_WAIT); the refresh did not finish"
        )
        super().__init__(self.message)


@dataclass(frozen=True)
class CurrentToken:
    """Credential ``name``'s token state as the row holds it now (values not in repr)."""

    name: str
    access_token: str = field(default="", repr=False)
    refresh_token: str = field(default="", repr=False)
    expires_at: datetime | None = None
    needs_reconnect: bool = False

    def usable(self, now: datetime, refused: str | None = None) -> bool:
        """A token that has not expired and is not the one the API just refused."""
        if not self.access_token or self.access_token == refused:
            return False
        return self.expires_at is None or self.expires_at > now


def _current(row: Credential) -> CurrentToken:
    values = unseal(row.secrets, row.name)
    return CurrentToken(
        name=row.name,
        access_token=values.get("access_token", ""),
        refresh_token=values.get("refresh_token", ""),
        expires_at=row.expires_at,
        needs_reconnect=row.needs_reconnect,
    )


class HeldCredential:
    """Credential ``name`` while its refresh lock is held, inside one transaction."""

    def __init__(self, name: str, using: str) -> None:
        self.name = name
        self.using = using

    def _row(self) -> Credential:
        rows = Credential.objects.using(self.using)
        if connections[self.using].features.has_select_for_update:
            rows = rows.select_for_update()
        return shared_cache_retry(lambda: rows.get(name=self.name))

    def current(self) -> CurrentToken:
        """The row as it is now (after any refresh another process committed)."""
        return _current(self._row())

    def store(self, access_token: str, lifetime: float, refresh_token: str | None) -> None:
        """Write the new access token, its expiry (``lifetime`` seconds from now) and a
        rotated ``refresh_token`` (None or empty: the provider kept the old one) in one
        statement: on PostgreSQL inside the transaction holding the row lock; on SQLite
        one short write, as ``last_used_at``'s (a step thread's read is not refused)."""
        row = self._row()
        values = unseal(row.secrets, row.name)
        values["access_token"] = access_token
        if refresh_token:
            values["refresh_token"] = refresh_token
        now = timezone.now()
        changes = {
            "secrets": seal(values),
            "secret_fields": sorted(values),
            "expires_at": now + timedelta(seconds=lifetime),
            "updated_at": now,
        }
        rows = Credential.objects.using(self.using).filter(pk=row.pk)
        shared_cache_retry(lambda: rows.update(**changes))

    def mark_needs_reconnect(self) -> None:
        """The token endpoint refused the credential: no call uses it until a person
        sets or connects it again (which clears the mark)."""
        rows = Credential.objects.using(self.using).filter(name=self.name)
        shared_cache_retry(lambda: rows.update(needs_reconnect=True, expires_at=None))


def lock_redis_url() -> str:
    return str(getattr(settings, "FLOWPILOT_TOKEN_LOCK_REDIS_URL", "") or "")


def refresh_wait() -> float:
    return float(getattr(settings, "FLOWPILOT_TOKEN_REFRESH_WAIT", 30.0))


@contextmanager
def refresh_lock(name: str, *, wait: float | None = None) -> Iterator[HeldCredential]:
    """Hold credential ``name``'s refresh lock (Redis or the database, see the module)
    and one transaction on its row; raises :class:`RefreshWaitTimeout` after ``wait``
    seconds (default ``FLOWPILOT_TOKEN_REFRESH_WAIT``)."""
    wait = refresh_wait() if wait is None else wait
    url = lock_redis_url()
    if url:
        with _redis_lock(url, name, wait), _row_lock(name, wait) as held:
            yield held
    else:
        with _row_lock(name, wait) as held:
            yield held


@contextmanager
def _redis_lock(url: str, name: str, wait: float) -> Iterator[None]:
    import redis  # only the refresh path needs it

    client = redis.Redis.from_url(url)
    # The lock expires on its own (a worker killed while refreshing does not block the
    # credential for ever) after the wait plus a token request's time.
    lock = client.lock(LOCK_PREFIX + name, timeout=wait + 60, blocking_timeout=wait)
    try:
        if not lock.acquire():
            raise RefreshWaitTimeout(name, wait)
        try:
            yield
        finally:
            # expired and taken by another process meanwhile: not ours to release
            with suppress(redis.exceptions.LockError):
                lock.release()
    finally:
        client.close()


@contextmanager
def _row_lock(name: str, wait: float) -> Iterator[HeldCredential]:
    using = router.db_for_write(Credential)
    connection = connections[using]
    if connection.vendor != "postgresql":
        with _local_lock(name, wait):
            try:
                yield HeldCredential(name, using)
            finally:
                _release_thread_connection()
        return
    with transaction.atomic(using=using):
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{wait}s"])
            held = HeldCredential(name, using)
            held.current()  # the row lock (SELECT … FOR UPDATE), held until the commit
        except DatabaseError as exc:
            if "lock" in str(exc).lower():
                raise RefreshWaitTimeout(name, wait) from None
            raise
        yield held


_LOCAL_LOCKS: dict[str, threading.Lock] = {}
_LOCAL_LOCKS_GUARD = threading.Lock()


@contextmanager
def _local_lock(name: str, wait: float) -> Iterator[None]:
    """SQLite: one process (SQLite is the single-process, in-process setup), so a lock
    per credential name in this process, the one deliberate process-wide state here.
    Holding SQLite's write lock across the token request instead would refuse every
    other thread's read of the table (shared-cache databases do not wait)."""
    with _LOCAL_LOCKS_GUARD:
        lock = _LOCAL_LOCKS.setdefault(name, threading.Lock())
    if not lock.acquire(timeout=wait):
        raise RefreshWaitTimeout(name, wait)
    try:
        yield
    finally:
        lock.release()


def read_token(name: str) -> CurrentToken:
    """Credential ``name``'s token state, read without a lock."""
    return _current(Credential.objects.get(name=name))
