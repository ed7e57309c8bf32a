"""Who calls flowpilot's MCP server: the REST API's token authentication, unchanged.

The API authenticates programs with DRF's ``TokenAuthentication``
(``Authorization: Token <key>``); the MCP server does the same, through the same
class, on every call: over streamable HTTP the header of each request, over stdio
the token the process was started with (``--token`` or ``FLOWPILOT_MCP_TOKEN``).
A deleted token or a deactivated user stops working at the next call.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import TYPE_CHECKING

from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TOKEN_ENV = "FLOWPILOT_MCP_TOKEN"  # noqa: S105 - the name of the variable, not a token
NO_TOKEN = (
    "an API token is needed: `Authorization: Token <key>` over HTTP, --token or "
    f"{TOKEN_ENV} over stdio (create one with `manage.py drf_create_token USER`)"
)


def user_for_header(header: str | None) -> User:
    """The user of an ``Authorization`` header value, parsed exactly as the API parses it.

    Raises ``NotAuthenticated`` without a token, ``AuthenticationFailed`` for a malformed
    header, an unknown token or an inactive user (DRF's messages).
    """
    request = SimpleNamespace(headers={"authorization": header or ""})
    found = TokenAuthentication().authenticate(request)
    if found is None:
        raise exceptions.NotAuthenticated(NO_TOKEN)
    return found[0]


def user_for_token(key: str | None) -> User:
    """The user of a token key (the stdio transport's)."""
    if not key or not key.strip():
        raise exceptions.NotAuthenticated(NO_TOKEN)
    return user_for_header(f"Token {key.strip()}")
