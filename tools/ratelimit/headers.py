"""Reading an API's own rate headers: when must every caller of this key pause, if at all.

Pure (no clock but the ``now`` passed in, no I/O). Read, in this order:

- a ``429`` (or a ``503``) with ``Retry-After`` (delta seconds or an HTTP date): every
  caller waits until then;
- ``X-RateLimit-Remaining: 0`` with ``X-RateLimit-Reset`` (GitHub's epoch seconds, or
  delta seconds when the number is smaller than a date could be);
- the IETF draft's ``RateLimit-Remaining: 0`` with ``RateLimit-Reset`` (delta seconds),
  and its later single field ``RateLimit: "default";r=0;t=30`` (or the older
  ``limit=100, remaining=0, reset=30``); with ``remaining`` 0 and no reset, the window
  ``w`` of ``RateLimit-Policy: "default";q=100;w=60`` is the pause.

Remaining above 0 pauses nobody. A pause is capped at ``max_pause`` seconds: a hostile
or broken header cannot stop a host's calls for a day.
"""

from __future__ import annotations

import re

import httpx

from tools.http.response import retry_after_seconds

# A reset value this large is an epoch time, not a delta (2001-09-09 in seconds).
EPOCH_FLOOR = 1_000_000_000

_PARAM = re.compile(r"(?:^|[;,\s])([A-Za-z-]+)\s*=\s*\"?(-?[0-9]+(?:\.[0-9]+)?)\"?")


def _number(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value.strip().split(",")[0])
    except ValueError:
        return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None


def _params(value: str | None) -> dict[str, float]:
    """``name=number`` pairs of a structured or list header, lower-cased names."""
    if not value:
        return {}
    return {name.lower(): float(number) for name, number in _PARAM.findall(value)}


def _reset_delay(value: float | None, now: float) -> float | None:
    if value is None or value < 0:
        return None
    return max(0.0, value - now) if value >= EPOCH_FLOOR else value


def pause_seconds(
    status: int, headers: httpx.Headers, *, now: float, max_pause: float
) -> float | None:
    """How long every caller of the key must wait after this answer; None: no pause.

    Every answer is read, so the headers are gone through once (an answer without any
    rate header costs one pass over its names)."""
    rated = {k: v for k, v in headers.items() if "ratelimit" in k or k == "retry-after"}
    if not rated:
        return None
    delay = _told(status, headers, rated, now)
    if delay is None or delay <= 0:
        return None
    return min(delay, max_pause)


def _told(status: int, headers: httpx.Headers, rated: dict[str, str], now: float) -> float | None:
    if status in (429, 503) and rated.get("retry-after"):
        told = retry_after_seconds(headers, now=now)
        if told is not None:
            return told
    remaining = _number(rated.get("x-ratelimit-remaining"))
    if remaining is not None and remaining <= 0:
        reset = _reset_delay(_number(rated.get("x-ratelimit-reset")), now)
        if reset is not None:
            return reset
    remaining = _number(rated.get("ratelimit-remaining"))
    reset = _reset_delay(_number(rated.get("ratelimit-reset")), now)
    combined = _params(rated.get("ratelimit"))
    if remaining is None:
        remaining = combined.get("r", combined.get("remaining"))
    if reset is None:
        reset = _reset_delay(combined.get("t", combined.get("reset")), now)
    if remaining is None or remaining > 0:
        return None
    if reset is not None:
        return reset
    return _params(rated.get("ratelimit-policy")).get("w")
