"""The database store: concurrent reservations (threads, own connections) never share a
slot; pauses only move later; step threads leave no connection open."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from tests.tools.ratelimit.conftest import START
from tools.models import RateLimitSlot
from tools.ratelimit.db_store import DatabasePaceStore


@pytest.mark.django_db(transaction=True)
def test_concurrent_reservations_get_distinct_slots():
    if connection.vendor != "postgresql":
        pytest.skip("concurrent writers need PostgreSQL (SQLite has one writer at a time)")
    store = DatabasePaceStore()

    def reserve(_: int) -> float:
        return store.reserve("k", now=START, interval=0.1, tolerance=0, max_wait=60)

    with ThreadPoolExecutor(6) as pool:
        waits = sorted(pool.map(reserve, range(30)))
    assert waits == [round(i * 0.1, 3) for i in range(30)]
    RateLimitSlot.objects.all().delete()


@pytest.mark.django_db
def test_pause_moves_only_later_and_reset_forgets():
    store = DatabasePaceStore()
    store.pause("a", until=START + 5)
    store.pause("a", until=START + 2)
    assert store.paused_until("a") == START + 5
    assert store._read_pauses(START + 6) == {}
    store.reset(["a"])
    assert not RateLimitSlot.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_a_step_thread_closes_its_connection():
    if connection.vendor != "postgresql":
        pytest.skip("the SQLite test database shares one connection between threads")
    store = DatabasePaceStore()
    seen: list[object] = []

    def in_thread() -> None:
        store.reserve("t", now=START, interval=1, tolerance=0, max_wait=5)
        seen.append(connection.connection)

    thread = threading.Thread(target=in_thread)
    thread.start()
    thread.join()
    assert seen == [None]
    RateLimitSlot.objects.all().delete()
