"""Pacing state in Redis, used when a Redis broker is configured.

A key's theoretical arrival time is one string (``<prefix>tat:<key>``, whole Unix
milliseconds, expiring once it lies in the past); the pauses are one hash
(``<prefix>paused``, key -> end in ms), read whole by ``known_pauses``. A reservation
is one Lua script, which Redis runs atomically, so two workers never get the same slot.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping

import redis

from tools.ratelimit.hints import PauseHints

# KEYS[1] = the key's tat, KEYS[2] = the pauses hash; ARGV = now, interval, tolerance,
# max wait (ms), the key (the hash field). Returns the wait in ms (reserved when <= max).
_RESERVE = """
local now = tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local slot = tat - tonumber(ARGV[3])
if slot < now then slot = now end
local paused = tonumber(redis.call('HGET', KEYS[2], ARGV[5]) or '0')
if paused > slot then slot = paused end
local wait = slot - now
if wait > tonumber(ARGV[4]) then return wait end
if slot > tat then tat = slot end
tat = tat + tonumber(ARGV[2])
redis.call('SET', KEYS[1], tostring(tat), 'PX', tat - now + 1000)
return wait
"""

# KEYS[1] = the pauses hash; ARGV = the key, the end (ms), the hash's expiry (ms).
_PAUSE = """
local ends = tonumber(ARGV[2])
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if ends > held then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
if redis.call('PTTL', KEYS[1]) < tonumber(ARGV[3]) then
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
end
return 1
"""


def _ms(seconds: float) -> int:
    return round(seconds * 1000)


class RedisPaceStore:
    """See the module doc. ``prefix`` namespaces the keys."""

    errors: tuple[type[Exception], ...] = (redis.RedisError,)

    def __init__(
        self, client: redis.Redis, *, prefix: str = "flowpilot:pace:", owned: bool = True
    ) -> None:
        """``owned``: ``close`` closes ``client`` (False for a client shared by the process)."""
        self.client = client
        self.prefix = prefix
        self.owned = owned
        self.hints = PauseHints()
        self._reserve = client.register_script(_RESERVE)
        self._pause = client.register_script(_PAUSE)

    @classmethod
    def from_url(cls, url: str, *, prefix: str = "flowpilot:pace:") -> RedisPaceStore:
        """A store with a client (and connections) of its own, closed with it."""
        return cls(redis.Redis.from_url(url, socket_timeout=5), prefix=prefix)

    @classmethod
    def shared(cls, url: str) -> RedisPaceStore:
        """The store of ``url`` this process shares (``close`` leaves it open): one
        connection pool, and one set of pause hints, per process."""
        return _shared_store(url)

    @property
    def _paused_key(self) -> str:
        return self.prefix + "paused"

    def reserve(
        self, key: str, *, now: float, interval: float, tolerance: float, max_wait: float
    ) -> float:
        args: list[int | str] = [_ms(now), _ms(interval), _ms(tolerance), _ms(max_wait), key]
        waited = self._reserve(keys=[self.prefix + "tat:" + key, self._paused_key], args=args)
        return int(waited) / 1000

    def pause(self, key: str, *, until: float) -> None:
        expiry = max(_ms(until - time.time()), 1000) + 60_000  # outlives the pause
        self._pause(keys=[self._paused_key], args=[key, _ms(until), expiry])
        self.hints.add(key, until)

    def paused_until(self, key: str) -> float | None:
        value = self.client.hget(self._paused_key, key)
        return None if value is None else int(value) / 1000

    def known_pauses(self, *, now: float, refresh: float) -> Mapping[str, float]:
        return self.hints.get(now=now, refresh=refresh, read=self._read_pauses)

    def _read_pauses(self, now: float) -> dict[str, float]:
        found: dict[str, float] = {}
        ended: list[bytes | str] = []
        for key, value in self.client.hgetall(self._paused_key).items():
            until = int(value) / 1000
            if until > now:
                found[key.decode() if isinstance(key, bytes) else key] = until
            else:
                ended.append(key)
        if ended:
            self.client.hdel(self._paused_key, *ended)
        return found

    def reset(self, keys: list[str] | None = None) -> None:
        """Forget the pacing of ``keys`` (None: of every key)."""
        if keys is None:
            names = list(self.client.scan_iter(match=self.prefix + "*", count=500))
            if names:
                self.client.delete(*names)
        elif keys:
            self.client.delete(*(self.prefix + "tat:" + k for k in keys))
            self.client.hdel(self._paused_key, *keys)
        self.hints = PauseHints()

    def close(self) -> None:
        if self.owned:
            self.client.close()


@functools.cache
def _shared_store(url: str) -> RedisPaceStore:
    """One per URL and process (the settings name one URL; tests may name a few)."""
    return RedisPaceStore(redis.Redis.from_url(url, socket_timeout=5), owned=False)
