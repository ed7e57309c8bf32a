"""The breaker around real HTTP calls on loopback, on both stores, with a pinned clock."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from tests.tools.breaker.conftest import flaky_spec
from tests.tools.conftest import Reply
from tools.breaker.core import STATES, BreakerPolicy, CircuitBreakers, breaker_host, state_named
from tools.breaker.db_store import DatabaseBreakerStore
from tools.breaker.redis_store import RedisBreakerStore
from tools.errors import CircuitOpen, ToolHTTPError, ToolRateLimited, ToolTimeout, ToolUnreachable
from tools.http_client import call_http_tool
from tools.models import Breaker

pytestmark = pytest.mark.django_db

UNAVAILABLE = Reply.json({"message": "down for maintenance"}, 503)


@pytest.fixture
def call(server, make_ctx, breakers):
    """``call(spec=None)``: one call of the flaky tool through ``breakers``."""

    def run(spec=None, *, through=None):
        ctx = make_ctx(env={"BASE": server.url}, breakers=through or breakers)
        return call_http_tool(spec or flaky_spec(), {}, ctx)

    return run


def fail_times(call, n: int, error=ToolHTTPError) -> None:
    for _ in range(n):
        with pytest.raises(error):
            call()


def test_opens_after_n_retryable_failures_and_refuses_without_sending(
    server, call, breakers, clock
):
    server.reply(UNAVAILABLE)
    fail_times(call, 3)
    with pytest.raises(CircuitOpen) as refused:
        call()
    assert len(server.requests) == 3  # the refused call sent nothing
    host = breaker_host(server.url)
    retry_at = clock.now + timedelta(seconds=30)
    assert refused.value.host == host
    assert refused.value.retry_at == retry_at
    assert refused.value.retryable
    assert refused.value.retry_after == 30
    assert host in refused.value.message
    assert retry_at.isoformat() in refused.value.message
    assert refused.value.as_dict() == {
        "type": "circuit_open",
        "message": refused.value.message,
        "retryable": True,
        "host": host,
        "retry_at": retry_at.isoformat(),
    }
    [state] = breakers.store.states()
    assert (state.host, state.state, state.failures) == (host, "open", 3)
    assert state.opened_at == clock.now
    assert state.tried_again_at == retry_at


def test_half_open_after_the_cooldown_and_a_success_closes(server, call, breakers, clock):
    server.reply(UNAVAILABLE)
    fail_times(call, 3)
    clock.advance(29.9)
    fail_times(call, 1, CircuitOpen)
    clock.advance(0.1)
    server.reply(Reply.json({"ok": True}))
    assert call().output == {"ok": True}
    assert breakers.store.states() == []
    assert call().output == {"ok": True}  # closed: every call goes through
    assert len(server.requests) == 5


def test_a_failed_trial_opens_it_again_for_another_cooldown(server, call, breakers, clock):
    server.reply(UNAVAILABLE)
    fail_times(call, 3)
    clock.advance(30)
    fail_times(call, 1)  # the trial reached the server and failed
    assert len(server.requests) == 4
    with pytest.raises(CircuitOpen) as refused:
        call()
    assert refused.value.retry_at == clock.now + timedelta(seconds=30)
    [state] = breakers.store.states()
    assert (state.state, state.failures) == ("open", 4)


def test_exactly_one_trial_while_half_open(store, clock):
    policy = BreakerPolicy(failures=1, cooldown=30)
    store.record_failure("api.test:443", now=clock(), policy=policy)
    clock.advance(30)
    first = store.admit("api.test:443", now=clock(), policy=policy)
    second = store.admit("api.test:443", now=clock(), policy=policy)
    assert first.allowed
    assert first.trial
    assert not second.allowed
    assert second.retry_at == clock.now + timedelta(seconds=30)
    [state] = store.states()
    assert state.state == "half_open"
    assert state.tried_again_at == second.retry_at
    clock.advance(30)  # the trial never reported (its worker died): another one goes
    assert store.admit("api.test:443", now=clock(), policy=policy).trial


def test_concurrent_callers_race_for_one_trial(redis_store, clock):
    policy = BreakerPolicy(failures=1, cooldown=30)
    redis_store.record_failure("api.test:443", now=clock(), policy=policy)
    clock.advance(31)
    barrier, answers = threading.Barrier(8), []

    def admit() -> None:
        barrier.wait()
        answers.append(redis_store.admit("api.test:443", now=clock(), policy=policy))

    threads = [threading.Thread(target=admit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(a.allowed for a in answers) == [False] * 7 + [True]


@pytest.mark.parametrize(
    "reply",
    [UNAVAILABLE, Reply.json({"message": "slow down"}, 429), Reply(status=502, body=b"bad")],
)
def test_retryable_statuses_count(server, call, reply):
    server.reply(reply)
    fail_times(call, 3, (ToolHTTPError, ToolRateLimited))
    fail_times(call, 1, CircuitOpen)


def test_unreachable_and_timeouts_count(server, make_ctx, breakers, closed_port):
    refused = make_ctx(env={"BASE": f"http://127.0.0.1:{closed_port}"}, breakers=breakers)
    for _ in range(3):
        with pytest.raises(ToolUnreachable):
            call_http_tool(flaky_spec(), {}, refused)
    with pytest.raises(CircuitOpen):
        call_http_tool(flaky_spec(), {}, refused)
    server.reply(Reply(body=b"{}", delay=1.0))
    slow = make_ctx(env={"BASE": server.url}, breakers=breakers, timeout=0.1)
    with pytest.raises(ToolTimeout):
        call_http_tool(flaky_spec(), {}, slow)
    assert [s.host for s in breakers.store.states()] == sorted(
        [breaker_host(server.url), f"127.0.0.1:{closed_port}"]
    )


def test_an_answer_that_is_not_retryable_forgets_the_failures(server, call, breakers):
    server.reply(UNAVAILABLE)
    fail_times(call, 2)
    server.reply(Reply.json({"message": "no such thing"}, 404))
    fail_times(call, 1)  # the host answered: a fatal error, but not the host's fault
    assert breakers.store.states() == []
    server.reply(UNAVAILABLE)
    fail_times(call, 2)
    [state] = breakers.store.states()
    assert (state.state, state.failures) == ("closed", 2)


def test_failures_further_apart_than_the_window_start_a_new_count(server, call, clock):
    server.reply(UNAVAILABLE)
    fail_times(call, 2)
    clock.advance(301)
    fail_times(call, 2)  # counts 1, 2 again
    clock.advance(299)
    fail_times(call, 1)  # 3 within the window: open
    fail_times(call, 1, CircuitOpen)


def test_a_tool_can_set_its_own_thresholds(server, call, clock):
    server.reply(UNAVAILABLE)
    strict = flaky_spec(failures=1, cooldown=5)
    fail_times(lambda: call(strict), 1)
    with pytest.raises(CircuitOpen) as refused:
        call(strict)
    assert refused.value.retry_at == clock.now + timedelta(seconds=5)


def test_a_tool_can_opt_out(server, call, breakers):
    server.reply(UNAVAILABLE)
    exempt = flaky_spec(enabled=False)
    fail_times(lambda: call(exempt), 5)
    assert breakers.store.states() == []
    assert len(server.requests) == 5


def test_hosts_have_separate_breakers(server, make_ctx, breakers, closed_port):
    server.reply(UNAVAILABLE)
    down = make_ctx(env={"BASE": f"http://127.0.0.1:{closed_port}"}, breakers=breakers)
    for _ in range(3):
        with pytest.raises(ToolUnreachable):
            call_http_tool(flaky_spec(), {}, down)
    up = make_ctx(env={"BASE": server.url}, breakers=breakers)
    with pytest.raises(ToolHTTPError):
        call_http_tool(flaky_spec(), {}, up)  # another port: its own breaker, still closed
    assert len(server.requests) == 1


def test_no_breakers_on_the_context_means_no_breaker(server, make_ctx):
    server.reply(UNAVAILABLE)
    ctx = make_ctx(env={"BASE": server.url})
    for _ in range(8):
        with pytest.raises(ToolHTTPError):
            call_http_tool(flaky_spec(), {}, ctx)


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("https://API.example.com/v1/x", "api.example.com:443"),
        ("http://example.com?q=1", "example.com:80"),
        ("http://127.0.0.1:8123/p", "127.0.0.1:8123"),
        ("http://[::1]:9000/", "[::1]:9000"),
    ],
)
def test_the_breaker_key_is_host_and_port(url, host):
    assert breaker_host(url) == host


def test_thresholds_are_checked():
    with pytest.raises(ValueError, match="at least 1"):
        BreakerPolicy(failures=0)
    with pytest.raises(ValueError, match="positive"):
        BreakerPolicy(cooldown=0)


def test_an_unavailable_store_lets_calls_through_with_a_warning(
    server, make_ctx, closed_port, caplog
):
    store = RedisBreakerStore.from_url(f"redis://127.0.0.1:{closed_port}/0")
    ctx = make_ctx(env={"BASE": server.url}, breakers=CircuitBreakers(store=store))
    server.reply(UNAVAILABLE)
    for _ in range(6):
        with pytest.raises(ToolHTTPError):
            call_http_tool(flaky_spec(), {}, ctx)
    assert len(server.requests) == 6
    assert "circuit breaker store unavailable for 127.0.0.1:" in caplog.text
    store.close()


class CountingStore:
    """Wraps a store and counts the calls each operation gets."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.errors = inner.errors
        self.calls: list[str] = []

    def __getattr__(self, name):
        method = getattr(self.inner, name)

        def counted(*args, **kwargs):
            self.calls.append(name)
            return method(*args, **kwargs)

        return counted


def test_a_healthy_host_costs_one_read_and_no_write(server, call, store, clock):
    counting = CountingStore(store)
    breakers = CircuitBreakers(store=counting, policy=BreakerPolicy(failures=3), clock=clock)
    call(through=breakers)
    call(through=breakers)
    assert counting.calls == ["admit", "admit"]  # clean: nothing to forget
    assert store.states() == []


def test_a_success_after_counted_failures_forgets_them(server, call, store, clock):
    counting = CountingStore(store)
    breakers = CircuitBreakers(store=counting, policy=BreakerPolicy(failures=3), clock=clock)
    server.reply(UNAVAILABLE)
    fail_times(lambda: call(through=breakers), 2)
    server.reply(Reply.json({"ok": True}))
    call(through=breakers)
    assert counting.calls[-2:] == ["admit", "record_success"]
    assert store.states() == []
    call(through=breakers)  # clean again: one read
    assert counting.calls[-1] == "admit"


def test_a_healthy_call_is_one_statement_on_the_database(
    server, call, clock, django_assert_num_queries
):
    Breaker.objects.all().delete()
    breakers = CircuitBreakers(store=DatabaseBreakerStore(), clock=clock)
    call(through=breakers)  # warm
    with django_assert_num_queries(1):
        call(through=breakers)


def test_a_stored_state_name_reads_back_as_the_state_and_anything_else_is_refused():
    assert [state_named(name) for name in ("closed", "open", "half_open")] == list(STATES)
    with pytest.raises(ValueError, match="not a breaker state: 'ajar'"):
        state_named("ajar")
