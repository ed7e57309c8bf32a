"""OAuth2 access tokens for ``auth: {type: oauth2}`` and stored
``oauth2_client_credentials`` credentials: client credentials or refresh token.

The token is fetched from ``token_url`` (a form POST, the client authenticated with
HTTP Basic as RFC 6749 §2.3.1 requires servers to accept), cached until shortly
before ``expires_in`` runs out, and fetched again once when the API answers 401.

The cache is per process — the one deliberate process-wide state of the tools layer,
because a token is worth reusing across runs and fetching one per call would hammer
the token endpoint. Entries are keyed by token URL, client id, scopes and a digest of
the secret, so two tools never share a token unless they share all of these.
Tokens, refresh tokens and client secrets are registered with the run's redactor and
never stored: only the tool's templates are.

Hand-written rather than authlib's httpx client: that client is its own
``httpx.Client`` subclass, while every call here goes through the run's client and the
attempt deadline of :mod:`tools.http.transport`; the grant itself is one form POST.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from dataclasses import dataclass

from tools.calls import ToolCallContext
from tools.errors import ToolAuthFailed, ToolError, ToolResponseInvalid
from tools.http.bodies import Body
from tools.http.request import (
    ACCEPT_ENCODING,
    OAuth2Client,
    PreparedRequest,
    set_credential_header,
)
from tools.http.response import decode_text
from tools.http.transport import send
from tools.secrets import basic_token

EXPIRY_MARGIN = 30.0
"""Seconds before ``expires_in`` when a cached token is no longer used."""
DEFAULT_LIFETIME = 3600.0
"""A token's assumed lifetime when the endpoint gives no ``expires_in``."""


@dataclass(frozen=True)
class _Token:
    value: str
    expires_at: float
    refresh_token: str | None
    lifetime: float = 0.0
    """Seconds from its fetching the token is used for (``expires_in`` less a margin)."""


class TokenCache:
    """Thread-safe token cache, keyed by (token URL, client id, scopes, secret digest)."""

    def __init__(self) -> None:
        self._tokens: dict[tuple[str, ...], _Token] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, ...], now: float) -> _Token | None:
        with self._lock:
            token = self._tokens.get(key)
        return token if token is not None and token.expires_at > now else None

    def put(self, key: tuple[str, ...], token: _Token) -> None:
        with self._lock:
            self._tokens[key] = token

    def drop(self, key: tuple[str, ...], value: str) -> None:
        """Forget ``value`` (the token the API refused), unless another call replaced it."""
        with self._lock:
            if (found := self._tokens.get(key)) is not None and found.value == value:
                del self._tokens[key]

    def clear(self) -> None:
        with self._lock:
            self._tokens.clear()


PROCESS_TOKENS = TokenCache()


def client_key(client: OAuth2Client) -> tuple[str, ...]:
    """The cache key of ``client``'s tokens: URL, client id, scopes, a secret digest."""
    secret = f"{client.client_secret}\0{client.refresh_token}".encode()
    digest = hashlib.sha256(secret).hexdigest()
    return (client.token_url, client.client_id, " ".join(client.scopes), digest)


def apply_oauth2(
    client: OAuth2Client,
    prepared: PreparedRequest,
    ctx: ToolCallContext,
    *,
    timeout: float,
    fresh: bool = False,
) -> str:
    """Add ``Authorization: Bearer <token>`` to ``prepared``; returns the token.

    ``client`` comes from the tool's templates or a stored credential
    (``prepared.oauth2``). ``fresh`` drops the cached token first (after a 401).
    Errors from the token endpoint are ``auth_failed`` (refused) or transport errors,
    all marked ``not_sent``: the API request itself never left.
    """
    cache = PROCESS_TOKENS
    key = client_key(client)
    now = time.monotonic()
    token = None if fresh else cache.get(key, now)
    if token is None:
        try:
            token = _fetch(client, cache.get(key, float("-inf")), ctx, timeout=timeout)
        except ToolError as exc:
            exc.mark_not_sent()
            raise
        cache.put(key, token)
    ctx.redactor.add_secret(token.value)
    set_credential_header(prepared, "Authorization", f"Bearer {token.value}")
    return token.value


def drop_token(client: OAuth2Client, value: str) -> None:
    PROCESS_TOKENS.drop(client_key(client), value)


def request_token(client: OAuth2Client, ctx: ToolCallContext, *, timeout: float) -> _Token:
    """One token request for ``client`` (its refresh token, when it has one), uncached:
    the shared refresh of stored credentials (``tools.http.shared_token``) calls it
    while holding the credential's refresh lock. Errors as :func:`apply_oauth2`'s."""
    return _fetch(client, None, ctx, timeout=timeout)


def _fetch(
    client: OAuth2Client, previous: _Token | None, ctx: ToolCallContext, *, timeout: float
) -> _Token:
    refresh = client.refresh_token and (previous.refresh_token if previous else None)
    form = [("grant_type", "refresh_token" if client.refresh_token else "client_credentials")]
    if client.refresh_token:
        form.append(("refresh_token", refresh or client.refresh_token))
    if client.scopes:
        form.append(("scope", " ".join(client.scopes)))
    basic = basic_token(client.client_id, client.client_secret)
    ctx.redactor.add_basic_auth(client.client_id, client.client_secret)
    request = PreparedRequest(
        method="POST",
        url=client.token_url,
        headers={"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING},
        body=Body(data=form),
    )
    set_credential_header(request, "Authorization", f"Basic {basic}")
    received = send(request, ctx, timeout=timeout)
    text = decode_text(received.body, received.encoding)
    where = f"token endpoint {ctx.redactor.scrub_text(client.token_url)}"
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not 200 <= received.status < 300 or not isinstance(data, dict):
        detail = ctx.redactor.scrub_text(" ".join(text.split())[:300])
        raise ToolAuthFailed(
            f"{where} refused the credentials of client {client.client_id!r} "
            f"(HTTP {received.status}): {detail}",
            status=received.status if received.status >= 400 else 401,
        )
    return _token(data, where, ctx)


def _token(data: dict, where: str, ctx: ToolCallContext) -> _Token:
    value = data.get("access_token")
    if not isinstance(value, str) or not value:
        raise ToolResponseInvalid(f"{where}: the answer has no access_token")
    ctx.redactor.add_secret(value)
    refresh = data.get("refresh_token")
    if isinstance(refresh, str):
        ctx.redactor.add_secret(refresh)
    try:
        lifetime = float(data.get("expires_in") or DEFAULT_LIFETIME)
    except (TypeError, ValueError):
        lifetime = DEFAULT_LIFETIME
    margin = min(EXPIRY_MARGIN, lifetime / 10)
    usable = max(0.0, lifetime - margin)
    expires_at = time.monotonic() + usable
    return _Token(value, expires_at, refresh if isinstance(refresh, str) else None, usable)
