"""The one permission check of state-changing services.

The rule (docs/security.md, "Who may change what"): a service that changes state on
behalf of a person takes that person (``actor``) and checks the permission itself, so
every surface (admin action, admin view, API) is refused the same way, forged POSTs
included. ``actor=None`` is a trusted in-process caller only — an operator's
management command, the engine, the planner's own bookkeeping — and no surface that
has a request passes it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

from tools.errors import FlowpilotError

if TYPE_CHECKING:  # the auth models need the app registry; only their types are used here
    from django.contrib.auth.models import AnonymousUser, User

# Who acts: a request's user (possibly anonymous) or a command's ``--as`` user.
Actor: TypeAlias = "User | AnonymousUser"


class PermissionRefused(FlowpilotError):
    code = "permission_denied"


def permission_require(*, actor: Actor | None, permission: str, action: str) -> None:
    """Refuse (``PermissionRefused``) an ``actor`` that is inactive or lacks ``permission``.

    ``actor=None`` is a trusted in-process caller (see the module docstring).
    """
    if actor is None:
        return
    if not actor.is_active or not actor.has_perm(permission):
        who = actor.get_username() or "anonymous"
        raise PermissionRefused(f"{who} may not {action} (needs the `{permission}` permission)")


def actor_user(actor: Actor | None) -> User | None:
    """The user to record as having acted (``approved_by``, ``owner``): ``None`` for a
    trusted in-process caller or an anonymous actor (whom ``permission_require`` refuses
    anyway)."""
    from django.contrib.auth.models import User  # the app registry is ready in a service

    return actor if isinstance(actor, User) else None
