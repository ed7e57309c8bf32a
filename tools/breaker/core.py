"""The circuit breaker per host: its policy, its states, and the guard around one request.

A breaker is keyed by the ``host:port`` of an HTTP tool's request URL (built-in tools
have none). Its states:

- **closed** — calls go through; each retryable failure (unreachable, timeout, 429,
  5xx: ``FlowpilotError.retryable``) counts, any other outcome (the host answered)
  forgets the count. ``failures`` consecutive failures, each within ``window``
  seconds of the previous one, open it.
- **open** — calls are refused with :class:`~tools.errors.CircuitOpen` (nothing is
  sent) until ``retry_at`` = opened + ``cooldown``.
- **half-open** — after the cool-down exactly one caller (of every worker sharing the
  store) gets the trial; the others are refused until the trial reports. A success
  closes the breaker, a retryable failure opens it again for another cool-down. A
  trial that never reports (its worker died) is replaced after one cool-down.

The state lives in a store shared by every worker (``RedisBreakerStore`` or
``DatabaseBreakerStore``) whose operations are atomic; this module holds only what
both have in common. A :class:`CircuitBreakers` is built per run (or per process)
and passed explicitly on the tool-call context.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal, Protocol, TypeVar

import httpx
from django.utils import timezone
from pydantic import BaseModel, ConfigDict, Field

from tools.errors import CircuitOpen, FlowpilotError

logger = logging.getLogger("flowpilot.tools")

State = Literal["closed", "open", "half_open"]
T = TypeVar("T")
Clock = Callable[[], datetime]
STATES: tuple[State, ...] = ("closed", "open", "half_open")


def state_named(name: str) -> State:
    """The state a store kept as text; ``ValueError`` for a name no breaker writes."""
    for state in STATES:
        if state == name:
            return state
    raise ValueError(f"not a breaker state: {name!r}")


class BreakerConfig(BaseModel):
    """A tool's own breaker settings (the ``breaker:`` key of a tool file).

    Unset values fall back to the ``FLOWPILOT_BREAKER_*`` settings; ``enabled: false``
    exempts the tool (its calls are neither refused nor counted).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    enabled: bool = Field(True, description="false: this tool's calls bypass the breaker.")
    failures: int | None = Field(
        None, ge=1, le=1000, description="Consecutive retryable failures that open it."
    )
    cooldown: float | None = Field(
        None, gt=0, le=86400, description="Seconds open before a half-open trial."
    )


@dataclass(frozen=True)
class BreakerPolicy:
    """Thresholds for one call: the settings, overridden by the tool's ``breaker:``."""

    failures: int = 5
    cooldown: float = 30.0
    window: float = 300.0

    def __post_init__(self) -> None:
        if self.failures < 1:
            raise ValueError(f"breaker failures must be at least 1, got {self.failures}")
        if self.cooldown <= 0 or self.window <= 0:
            raise ValueError("breaker cooldown and window must be positive seconds")

    def for_tool(self, config: BreakerConfig | None) -> BreakerPolicy:
        if config is None:
            return self
        return replace(
            self,
            failures=config.failures if config.failures is not None else self.failures,
            cooldown=config.cooldown if config.cooldown is not None else self.cooldown,
        )


@dataclass(frozen=True)
class BreakerState:
    """One host's breaker as a store reports it (for listings; times are aware UTC)."""

    host: str
    state: State
    failures: int
    last_failure_at: datetime | None = None
    opened_at: datetime | None = None
    retry_at: datetime | None = None
    trial_until: datetime | None = None

    @property
    def tried_again_at(self) -> datetime | None:
        """When the next call may go through: the end of the cool-down or of the trial."""
        return self.trial_until if self.state == "half_open" else self.retry_at


@dataclass(frozen=True)
class Admission:
    """A store's answer to "may this call go?": ``allowed``, as the half-open ``trial``,
    or refused until ``retry_at``. ``clean``: the store holds nothing for the host (no
    failure counted), so a success has nothing to forget and writes nothing."""

    allowed: bool
    trial: bool = False
    retry_at: datetime | None = None
    clean: bool = False


ALLOW = Admission(allowed=True)  # closed, with failures counted
CLEAN = Admission(allowed=True, clean=True)  # nothing stored for the host


class BreakerStore(Protocol):
    """Shared breaker state. Every method is atomic across processes. ``errors`` are
    the exceptions that mean the store itself is unavailable."""

    errors: tuple[type[Exception], ...]

    def admit(self, host: str, *, now: datetime, policy: BreakerPolicy) -> Admission: ...

    def record_failure(self, host: str, *, now: datetime, policy: BreakerPolicy) -> bool:
        """Count a retryable failure; True when this failure opened the breaker."""
        ...

    def record_success(self, host: str) -> None: ...

    def states(self) -> list[BreakerState]:
        """Every host with a breaker that is not closed-and-clean, ordered by host."""
        ...

    def reset(self, hosts: list[str] | None) -> int:
        """Close the given hosts' breakers (None: all); the number that were tracked."""
        ...

    def close(self) -> None: ...


def breaker_host(url: str | httpx.URL) -> str:
    """The breaker key of a request URL: ``host:port`` (the scheme's default port when
    none is written), lower-cased, IPv6 in brackets."""
    parsed = url if isinstance(url, httpx.URL) else httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    host = parsed.host.lower()
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


@dataclass
class CircuitBreakers:
    """The breakers as one run (or process) sees them: a shared store, the default
    policy and the clock. Built by the caller and passed on ``ToolCallContext``."""

    store: BreakerStore
    policy: BreakerPolicy = BreakerPolicy()
    clock: Clock = timezone.now

    @contextmanager
    def guard(self, url: str | httpx.URL, config: BreakerConfig | None = None) -> Iterator[None]:
        """Around one request to ``url``: refuse it while the host's breaker is open
        (raising ``CircuitOpen`` before anything is sent), then record its outcome.

        A retryable ``FlowpilotError`` raised inside counts as a failure; a normal exit
        or any other ``FlowpilotError`` (the host answered) as a success. Anything else
        records nothing (a trial is then replaced after the cool-down). A success after
        a ``clean`` admission (the usual case: a healthy host) writes nothing, so a
        healthy call costs the store one read; a failure another worker counted during
        the call then stays counted (the consecutive count is approximate by the calls
        in flight, never by a state change: opening and the trial are atomic).

        The breaker fails open: when its store is unavailable (Redis down, a locked
        database), the call goes through uncounted and a warning is logged — a breaker
        protects the API, it must not become the outage.
        """
        if config is not None and not config.enabled:
            yield
            return
        host, policy = breaker_host(url), self.policy.for_tool(config)
        admission = self._store_call(host, self.store.admit, host, now=self.clock(), policy=policy)
        if admission is not None and not admission.allowed:
            raise CircuitOpen(host=host, retry_at=admission.retry_at, now=self.clock())
        clean = admission is not None and admission.clean
        try:
            yield
        except FlowpilotError as exc:
            if exc.retryable:
                now = self.clock()
                self._store_call(host, self.store.record_failure, host, now=now, policy=policy)
            elif not clean:
                self._store_call(host, self.store.record_success, host)
            raise
        if not clean:
            self._store_call(host, self.store.record_success, host)

    def _store_call(
        self, host: str, method: Callable[..., T], *args: Any, **kwargs: Any
    ) -> T | None:
        try:
            return method(*args, **kwargs)
        except self.store.errors as exc:
            logger.warning(
                "circuit breaker store unavailable for %s, the call goes through: %s: %s",
                host,
                type(exc).__name__,
                exc,
            )
            return None

    def close(self) -> None:
        self.store.close()

    def refresh(self) -> None:
        """Re-read what the store's run view keeps (``KnownHosts``); else nothing."""
        refresh = getattr(self.store, "refresh", None)
        if refresh is not None:
            self._store_call("(all hosts)", refresh)


@contextmanager
def breaker_guard(
    breakers: CircuitBreakers | None, url: str | httpx.URL, config: BreakerConfig | None = None
) -> Iterator[None]:
    """``breakers.guard(url, config)``, or nothing when the caller passed no breakers."""
    if breakers is None:
        yield
        return
    with breakers.guard(url, config):
        yield


def seconds(value: float) -> timedelta:
    return timedelta(seconds=value)
