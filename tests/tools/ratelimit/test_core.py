"""The pacer on both stores with a pinned clock: slots spaced by the limit, the burst,
long waits handed back to the step, pauses shared, nothing read when nothing is paused."""

from __future__ import annotations

import pytest
import redis

from tests.tools.ratelimit.conftest import START, Clock
from tools.errors import RateLimitWait
from tools.ratelimit.config import RateLimitConfig
from tools.ratelimit.core import MAX_KEY_CHARS, Pacer, stored_key
from tools.ratelimit.db_store import DatabasePaceStore

pytestmark = pytest.mark.django_db

TEN_PER_SECOND = RateLimitConfig(requests=10, per=1)


def test_calls_are_spaced_by_the_limit(pacer, clock):
    waits = [pacer.admit("host:api:443", TEN_PER_SECOND) for _ in range(4)]
    # Each sleep moves the clock to the slot, so every next call waits one interval.
    assert waits == [0.0, 0.1, 0.1, 0.1]
    assert clock.slept == [0.1, 0.1, 0.1]


def test_callers_at_the_same_moment_get_successive_slots(store, clock):
    # Four callers at once (sleeping elsewhere: the clock stands still).
    fixed = Pacer(store=store, clock=clock, sleep=lambda s: None)
    waits = [fixed.admit("host:api:443", TEN_PER_SECOND) for _ in range(4)]
    assert waits == [0.0, 0.1, 0.2, 0.3]


def test_a_burst_goes_at_once_after_an_idle_spell(store, clock):
    fixed = Pacer(store=store, clock=clock, sleep=lambda s: None)
    limit = RateLimitConfig(requests=10, per=1, burst=3)
    assert [fixed.admit("tool:t", limit) for _ in range(5)] == [0.0, 0.0, 0.0, 0.1, 0.2]
    clock.now += 10  # idle: the burst is back
    assert [fixed.admit("tool:t", limit) for _ in range(3)] == [0.0, 0.0, 0.0]


def test_a_wait_past_max_sleep_raises_and_reserves_nothing(store, clock):
    fixed = Pacer(store=store, max_sleep=0.25, clock=clock, sleep=lambda s: None)
    assert [fixed.admit("k", TEN_PER_SECOND) for _ in range(3)] == [0.0, 0.1, 0.2]
    with pytest.raises(RateLimitWait) as held:
        fixed.admit("k", TEN_PER_SECOND)
    assert held.value.retry_after == pytest.approx(0.3)
    assert held.value.retryable
    assert held.value.not_sent
    with pytest.raises(RateLimitWait) as again:
        fixed.admit("k", TEN_PER_SECOND)
    assert again.value.retry_after == pytest.approx(0.3)  # the refused one took no slot


def test_keys_are_independent(pacer):
    assert pacer.admit('input:account="a"@api:443', TEN_PER_SECOND) == 0.0
    assert pacer.admit('input:account="b"@api:443', TEN_PER_SECOND) == 0.0


def test_a_pause_holds_limited_and_unlimited_callers_of_the_key(store, clock):
    fixed = Pacer(store=store, max_sleep=5, clock=clock, sleep=lambda s: None)
    fixed.observe("host:api:443", 3.0)
    assert fixed.admit("host:api:443", None) == pytest.approx(3.0)
    assert fixed.admit("host:api:443", TEN_PER_SECOND) == pytest.approx(3.0)
    assert fixed.admit("host:other:443", None) == 0.0
    fixed.observe("host:api:443", 60.0)
    with pytest.raises(RateLimitWait):
        fixed.admit("host:api:443", None)
    fixed.observe("host:api:443", 1.0)  # an earlier end never shortens a pause
    assert fixed.store.paused_until("host:api:443") == pytest.approx(START + 60)


def test_a_pause_another_worker_records_is_seen_within_the_refresh(store, clock):
    mine = Pacer(store=store, refresh=1.0, clock=clock, sleep=lambda s: None)
    other_store = DatabasePaceStore() if isinstance(store, DatabasePaceStore) else None
    if other_store is None:
        from tools.ratelimit.redis_store import RedisPaceStore

        other_store = RedisPaceStore(store.client, prefix=store.prefix, owned=False)
    theirs = Pacer(store=other_store, clock=clock, sleep=lambda s: None)
    assert mine.admit("host:api:443", None) == 0.0  # read: nothing paused
    theirs.observe("host:api:443", 30.0)
    assert mine.admit("host:api:443", None) == 0.0  # not re-read yet: the trade-off
    clock.now += 1.0
    with pytest.raises(RateLimitWait) as held:  # re-read: paused for 29 s more
        mine.admit("host:api:443", None)
    assert held.value.retry_after == pytest.approx(29.0, abs=0.01)


class CountingStore:
    """A store that counts every call made to it."""

    errors: tuple[type[Exception], ...] = ()

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls: list[str] = []
        self.errors = inner.errors

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def counted(*args, **kwargs):
            self.calls.append(name)
            return method(*args, **kwargs)

        return counted


def test_no_store_round_trip_for_a_key_without_a_limit_or_pause(store, clock):
    counting = CountingStore(store)
    pacer = Pacer(store=counting, refresh=1.0, clock=clock, sleep=clock.sleep)
    for _ in range(100):
        pacer.admit("host:api:443", None)
    assert counting.calls == ["known_pauses"] * 100
    reads = store.hints._read_at
    assert reads == START  # the store itself was read once, at the first call


class DownStore:
    errors: tuple[type[Exception], ...] = (redis.ConnectionError,)

    def __getattr__(self, name):
        def down(*args, **kwargs):
            raise redis.ConnectionError("refused")

        return down


def test_an_unavailable_store_lets_the_call_through(caplog):
    clock = Clock()
    pacer = Pacer(store=DownStore(), clock=clock, sleep=clock.sleep)  # type: ignore[arg-type]
    assert pacer.admit("host:api:443", TEN_PER_SECOND) == 0.0
    pacer.observe("host:api:443", 5.0)
    assert "rate limit store unavailable for host:api:443" in caplog.text


def test_long_keys_are_stored_by_their_hash():
    long = "input:account=" + "x" * 500
    assert len(stored_key(long)) < MAX_KEY_CHARS
    assert stored_key(long) != stored_key(long + "y")
    assert stored_key("tool:t") == "tool:t"


def test_a_wait_past_max_pause_asks_again_after_max_pause(store, clock):
    fixed = Pacer(store=store, max_sleep=1, max_pause=60, clock=clock, sleep=lambda s: None)
    daily = RateLimitConfig(requests=1, per=86400)
    assert fixed.admit("tool:daily", daily) == 0.0
    with pytest.raises(RateLimitWait) as held:
        fixed.admit("tool:daily", daily)
    assert held.value.retry_after == 60
