"""Breaker state in Redis (a hash per host), used when a Redis broker is configured.

Each operation is one Lua script, which Redis runs atomically: two workers can never
both take the half-open trial, and a count and the transition it causes happen
together. Times are whole Unix milliseconds from the caller's clock (so tests can pin
it; whole numbers of 13 digits survive Lua's number-to-string conversion exactly).
Every write renews the key's expiry (cool-down + window): a breaker nobody touches for
that long is forgotten, which only ever closes it.
"""

from __future__ import annotations

import functools
import math
from datetime import UTC, datetime

import redis

from tools.breaker.core import ALLOW, CLEAN, Admission, BreakerPolicy, BreakerState, state_named

# KEYS[1] = the host's hash; ARGV = now, cooldown (the trial's slot) in ms, ttl in s.
# Returns {"clean"} (no hash) | {"allow"} | {"trial"} | {"refuse", due}.
_ADMIT = """
local h = redis.call('HMGET', KEYS[1], 'state', 'retry_at', 'trial_until')
local state = h[1]
if not state then return {'clean'} end
if state == 'closed' then return {'allow'} end
local now = tonumber(ARGV[1])
local due = h[2]
if state == 'half_open' then due = h[3] end
if due and now < tonumber(due) then return {'refuse', due} end
redis.call('HSET', KEYS[1], 'state', 'half_open',
           'trial_until', tostring(now + tonumber(ARGV[2])))
redis.call('EXPIRE', KEYS[1], ARGV[3])
return {'trial'}
"""

# ARGV = now, threshold, cooldown, window (ms), ttl (s). 1 when this failure opened it.
_FAILURE = """
local h = redis.call('HMGET', KEYS[1], 'state', 'failures', 'last_failure_at')
local state = h[1] or 'closed'
local now = tonumber(ARGV[1])
local failures = tonumber(h[2] or '0') + 1
if state == 'closed' and h[3] and now - tonumber(h[3]) > tonumber(ARGV[4]) then
  failures = 1
end
redis.call('HSET', KEYS[1], 'state', state, 'failures', failures, 'last_failure_at', ARGV[1])
local opened = 0
if state == 'half_open' or (state == 'closed' and failures >= tonumber(ARGV[2])) then
  redis.call('HSET', KEYS[1], 'state', 'open', 'opened_at', ARGV[1],
             'retry_at', tostring(now + tonumber(ARGV[3])))
  redis.call('HDEL', KEYS[1], 'trial_until')
  opened = 1
end
redis.call('EXPIRE', KEYS[1], ARGV[5])
return opened
"""


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _ts(value: bytes | str | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(int(value) / 1000, tz=UTC)


def _ms(value: datetime | float) -> int:
    """A time (or a duration in seconds) as whole milliseconds."""
    return round((value.timestamp() if isinstance(value, datetime) else value) * 1000)


class RedisBreakerStore:
    """See the module doc. ``prefix`` namespaces the keys (``<prefix><host>``)."""

    errors: tuple[type[Exception], ...] = (redis.RedisError,)

    def __init__(
        self, client: redis.Redis, *, prefix: str = "flowpilot:breaker:", owned: bool = True
    ) -> None:
        """``owned``: ``close`` closes ``client`` (False for a client shared by the process)."""
        self.client = client
        self.prefix = prefix
        self.owned = owned
        self._admit = client.register_script(_ADMIT)
        self._failure = client.register_script(_FAILURE)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "flowpilot:breaker:") -> RedisBreakerStore:
        """A store with a client (and connections) of its own, closed with it."""
        return cls(redis.Redis.from_url(url, socket_timeout=5), prefix=prefix)

    @classmethod
    def shared(cls, url: str) -> RedisBreakerStore:
        """The store of ``url`` this process shares (``close`` leaves it open).

        Every run, and every Celery step task, needs the breakers: a store of its own
        per task meant a new Redis client and connection (and its handshake) for each
        call, several times the cost of the one script the call runs. The store holds
        no state but its connection pool, which redis-py keeps per process (a forked
        worker process opens connections of its own) and which is safe across threads.
        """
        return _shared_store(url)

    def _key(self, host: str) -> str:
        return self.prefix + host

    @staticmethod
    def _ttl(policy: BreakerPolicy) -> int:
        return math.ceil(policy.cooldown + policy.window)

    def admit(self, host: str, *, now: datetime, policy: BreakerPolicy) -> Admission:
        args = [_ms(now), _ms(policy.cooldown), self._ttl(policy)]
        answer = self._admit(keys=[self._key(host)], args=args)
        verdict = _text(answer[0])
        if verdict == "clean":
            return CLEAN
        if verdict == "allow":
            return ALLOW
        if verdict == "trial":
            return Admission(allowed=True, trial=True)
        return Admission(allowed=False, retry_at=_ts(answer[1]))

    def record_failure(self, host: str, *, now: datetime, policy: BreakerPolicy) -> bool:
        limits = [policy.failures, _ms(policy.cooldown), _ms(policy.window)]
        args = [_ms(now), *limits, self._ttl(policy)]
        return bool(self._failure(keys=[self._key(host)], args=args))

    def record_success(self, host: str) -> None:
        self.client.delete(self._key(host))

    def _keys(self) -> list[str]:
        return sorted(_text(k) for k in self.client.scan_iter(match=self.prefix + "*", count=500))

    def states(self) -> list[BreakerState]:
        found = []
        for key in self._keys():
            fields = {_text(k): _text(v) for k, v in self.client.hgetall(key).items()}
            if not fields:
                continue  # expired or reset between the scan and the read
            found.append(
                BreakerState(
                    host=key[len(self.prefix) :],
                    state=state_named(fields.get("state", "closed")),
                    failures=int(fields.get("failures", "0")),
                    last_failure_at=_ts(fields.get("last_failure_at")),
                    opened_at=_ts(fields.get("opened_at")),
                    retry_at=_ts(fields.get("retry_at")),
                    trial_until=_ts(fields.get("trial_until")),
                )
            )
        return found

    def reset(self, hosts: list[str] | None) -> int:
        keys = self._keys() if hosts is None else [self._key(h) for h in hosts]
        return int(self.client.delete(*keys)) if keys else 0

    def close(self) -> None:
        if self.owned:
            self.client.close()


@functools.cache
def _shared_store(url: str) -> RedisBreakerStore:
    """One per URL and process (the settings name one URL; tests may name a few)."""
    return RedisBreakerStore(redis.Redis.from_url(url, socket_timeout=5), owned=False)
