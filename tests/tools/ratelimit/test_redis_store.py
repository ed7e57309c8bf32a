"""The Redis store: concurrent reservations never share a slot; reset forgets keys."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.tools.ratelimit.conftest import START


def test_concurrent_reservations_get_distinct_slots(redis_store):
    def reserve(_: int) -> float:
        return redis_store.reserve("k", now=START, interval=0.1, tolerance=0, max_wait=60)

    with ThreadPoolExecutor(8) as pool:
        waits = sorted(pool.map(reserve, range(40)))
    assert waits == [round(i * 0.1, 3) for i in range(40)]


def test_pauses_are_listed_until_they_end_and_reset_forgets(redis_store):
    redis_store.pause("a", until=START + 5)
    redis_store.pause("b", until=START - 1)
    assert dict(redis_store._read_pauses(START)) == {"a": START + 5}
    assert redis_store.client.hget(redis_store._paused_key, "b") is None  # ended: dropped
    redis_store.reserve("a", now=START, interval=1, tolerance=0, max_wait=60)
    redis_store.reset(["a"])
    assert redis_store.paused_until("a") is None
    assert redis_store.reserve("a", now=START, interval=1, tolerance=0, max_wait=60) == 0
