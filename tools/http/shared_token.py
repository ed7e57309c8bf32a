"""The access token of a stored OAuth2 credential, shared by every worker.

A call uses the token the credential row holds (read with the credential, so the
common path costs no statement more). When it is missing or expired, or the API
answered 401 to it, the call refreshes it under the credential's refresh lock
(:mod:`tools.credentials.tokens`): it re-reads the row, uses the token another process
stored meanwhile, or makes the one token request and stores the answer (with a rotated
refresh token) before releasing the lock. A token endpoint that refuses the credential
(a 4xx, such as ``invalid_grant``) marks it ``needs_reconnect`` and fails the call with
a non-retryable error naming the tool and the credential, never a value.
"""

from __future__ import annotations

from dataclasses import replace

from django.utils import timezone

from tools.calls import ToolCallContext
from tools.credentials.tokens import CurrentToken, RefreshWaitTimeout, refresh_lock
from tools.errors import ToolAuthFailed, ToolError, ToolTimeout
from tools.http.oauth2 import request_token
from tools.http.request import (
    OAuth2Client,
    PreparedRequest,
    StoredOAuth2,
    set_credential_header,
)


def apply_shared_token(
    stored: StoredOAuth2,
    client: OAuth2Client,
    prepared: PreparedRequest,
    ctx: ToolCallContext,
    *,
    timeout: float,
    refused: str | None = None,
) -> str:
    """Add ``Authorization: Bearer <token>`` to ``prepared`` with credential
    ``stored.name``'s shared token, refreshed first when it is not usable (``refused``:
    the token the API just answered 401 to). Returns the token."""
    held = CurrentToken(stored.name, stored.access_token, expires_at=stored.expires_at)
    if held.usable(timezone.now(), refused):
        token = stored.access_token
    else:
        try:
            token = _refresh(stored, client, ctx, timeout=timeout, refused=refused)
        except ToolError as exc:
            exc.mark_not_sent()
            raise
    ctx.redactor.add_secret(token)
    set_credential_header(prepared, "Authorization", f"Bearer {token}")
    return token


def _refresh(
    stored: StoredOAuth2,
    client: OAuth2Client,
    ctx: ToolCallContext,
    *,
    timeout: float,
    refused: str | None,
) -> str:
    where = f"tool {stored.tool!r}: credential {stored.name!r}"
    refusal: ToolAuthFailed | None = None
    try:
        with refresh_lock(stored.name) as held:
            current = held.current()
            for value in (current.access_token, current.refresh_token):
                ctx.redactor.add_secret(value)
            if current.needs_reconnect:
                raise _reconnect(where, "it was marked when a refresh failed")
            if current.usable(timezone.now(), refused):
                return current.access_token  # another process refreshed it meanwhile
            if current.refresh_token:
                client = replace(client, refresh_token=current.refresh_token)
            try:
                token = request_token(client, ctx, timeout=timeout)
            except ToolAuthFailed as exc:
                if not 400 <= exc.status < 500:
                    raise
                held.mark_needs_reconnect()  # committed with the transaction
                refusal = exc
            else:
                held.store(token.value, token.lifetime, token.refresh_token)
                return token.value
    except RefreshWaitTimeout as exc:
        raise ToolTimeout(f"tool {stored.tool!r}: {exc.message}") from None
    assert refusal is not None
    raise _reconnect(where, f"its token refresh was refused: {refusal.message}") from None


def _reconnect(where: str, why: str) -> ToolAuthFailed:
    return ToolAuthFailed(
        f"{where} needs to be reconnected ({why}): set or connect it again in the admin",
        status=401,
    )
