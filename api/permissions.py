"""Who may call what: Django model permissions, checked before any object is read.

Every endpoint needs an authenticated, active user. Each view names the model
permissions of each action (``required_perms``: action → permissions); reads need
the model's ``view_*`` permission too, which DRF's own ``DjangoModelPermissions``
does not ask for. The check runs before the object lookup, so a caller without the
permission gets the same 403 whether the object exists or not: a refusal never
tells that an object exists.

A method the endpoint does not have passes this check for any signed-in user, so DRF
answers it with 405 (the methods of a route are in the published schema, so that
tells nothing); without the exemption a superuser got a 403 for a ``PUT``.

DRF checks permissions before throttles, so an unauthenticated request never
reached the anonymous throttle: a flood got unlimited 401s. The permissions here run
the view's throttles first for a request without a user, so past
``FLOWPILOT_API_THROTTLE_ANON`` it is a 429.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rest_framework.permissions import BasePermission

if TYPE_CHECKING:  # DRF loads this module from its settings while rest_framework.views loads
    from rest_framework.request import Request
    from rest_framework.views import APIView


class ModelPermissions(BasePermission):
    """``view.required_perms[view.action]`` (or ``[request.method]``), all of them needed."""

    message = "you do not have the permission this action needs"

    def has_permission(self, request: Request, view: APIView) -> bool:
        if not signed_in(request, view):
            return False
        if request.method == "OPTIONS":  # DRF's metadata: the form of the endpoint
            return True
        if not hasattr(view, request.method.lower()):  # DRF answers 405
            return True
        user = request.user
        perms = required_perms(view, request)
        if perms is None:  # a view that forgot to declare its permissions is closed
            return False
        return user.has_perms(perms)


def signed_in(request: Request, view: APIView) -> bool:
    """Whether an active user made the request; throttles an anonymous one first."""
    user = request.user
    if user and user.is_authenticated and user.is_active:
        return True
    view.check_throttles(request)
    return False


class SignedIn(BasePermission):
    """Any active user (the schema and its pages); anonymous requests are throttled."""

    def has_permission(self, request: Request, view: APIView) -> bool:
        return signed_in(request, view)


def required_perms(view: APIView, request: Request) -> tuple[str, ...] | None:
    table = getattr(view, "required_perms", None) or {}
    action = getattr(view, "action", None)
    if action in table:
        return tuple(table[action])
    return tuple(table[request.method]) if request.method in table else None


class IsStaff(BasePermission):
    """Staff only (loading tool files from the server's disk)."""

    message = "only staff users may do this"

    def has_permission(self, request: Request, view: APIView) -> bool:
        return signed_in(request, view) and bool(request.user.is_staff)
