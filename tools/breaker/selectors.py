"""Reading breaker state for operators (the ``breakers`` command, the admin)."""

from __future__ import annotations

from tools.breaker.core import BreakerState, BreakerStore


def breakers_list(*, store: BreakerStore) -> list[BreakerState]:
    """Every host whose breaker is not closed-and-clean, ordered by host."""
    return sorted(store.states(), key=lambda s: s.host)
