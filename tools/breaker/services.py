"""Operator actions on breakers. A reset closes a breaker: the next call goes through."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied

from tools.breaker.core import BreakerStore

RESET_PERMISSION = "tools.reset_breaker"


def breakers_reset(*, store: BreakerStore, hosts: list[str] | None, user: Any = None) -> int:
    """Close the breakers of ``hosts`` (None: every host); the number that were tracked.

    ``user`` (an admin request's user) needs the ``tools.reset_breaker`` permission;
    None is a trusted caller (a management command run by the operator).
    """
    if user is not None and not user.has_perm(RESET_PERMISSION):
        raise PermissionDenied("resetting circuit breakers needs the 'reset_breaker' permission")
    if hosts is not None and not hosts:
        return 0
    return store.reset(sorted(set(hosts)) if hosts is not None else None)
