"""OAuth2 authorization code with PKCE (RFC 6749 §4.1, RFC 7636) for stored
``oauth2_authorization_code`` credentials, through authlib's httpx ``OAuth2Client``.

- :func:`begin_consent`: the provider's consent URL (``client_id``, ``redirect_uri``,
  ``scope``, ``state``, an S256 ``code_challenge``); the state is kept server-side in
  the person's session, bound to the credential, single-use, for
  :data:`STATE_LIFETIME`; the code verifier is kept sealed with the credential keys.
- :func:`finish_consent`: the callback: checks and spends the state, exchanges the
  code with the verifier at ``token_url``, stores the tokens sealed.
- :func:`disconnect`: revokes at ``revocation_url`` when one is set (RFC 7009) and
  clears the stored tokens.

The access token is refreshed at call time by ``tools.credentials.tokens``, once for
every worker.

Every error is a :class:`ConsentError` whose message names the credential and never
holds a token, a code, a verifier or a client secret.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx2  # authlib's httpx client is built on httpx2 (installed with openai and mcp)
from authlib.common.security import generate_token
from authlib.integrations.base_client.errors import OAuthError
from authlib.integrations.httpx_client import OAuth2Client
from django.utils import timezone

from tools.credentials.crypto import seal, unseal
from tools.credentials.store import (
    clear_oauth2_tokens,
    store_oauth2_tokens,
)
from tools.models import Credential

STATE_LIFETIME = timedelta(minutes=10)
"""How long a consent may take: a state older than this is refused."""
SESSION_KEY = "flowpilot_oauth2_consents"
"""Where the pending consents are kept in the person's (server-side) session."""
"""An access token this close to ``expires_at`` counts as expired."""
TIMEOUT = 15.0
"""Seconds for one request to the token or revocation endpoint."""


class ConsentError(Exception):
    """A consent, a token exchange or a revocation that failed; ``credential`` is the
    credential's id when known."""

    def __init__(self, message: str, credential: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.credential = credential


@dataclass(frozen=True)
class Connected:
    """What a finished consent stored: the credential, the scopes granted, the expiry."""

    credential: Credential
    scopes: tuple[str, ...]
    expires_at: datetime | None


def _client(credential: Credential, client_secret: str, redirect_uri: str = "") -> OAuth2Client:
    return OAuth2Client(
        client_id=credential.client_id,
        client_secret=client_secret or None,
        token_endpoint_auth_method="client_secret_basic" if client_secret else "none",
        revocation_endpoint_auth_method="client_secret_basic" if client_secret else "none",
        scope=" ".join(
            credential.scopes.split() if isinstance(credential.scopes, str) else credential.scopes
        )
        or None,
        redirect_uri=redirect_uri or None,
        code_challenge_method="S256",
        timeout=TIMEOUT,
    )


def _digest(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def begin_consent(
    credential: Credential,
    session: MutableMapping[str, Any],
    redirect_uri: str,
    *,
    now: datetime | None = None,
) -> str:
    """The URL of the provider's consent page for ``credential``; its state and code
    verifier are kept in ``session`` (the verifier sealed), bound to the credential."""
    if credential.type != "oauth2_authorization_code":
        raise ConsentError(
            f"credential {credential.name!r} is a {credential.type} credential: only an "
            "oauth2_authorization_code one is connected through a consent page",
            credential.pk,
        )
    moment = timezone.now() if now is None else now
    verifier = generate_token(64)  # RFC 7636 §4.1: 43 to 128 unreserved characters
    state = f"{credential.pk}.{generate_token(32)}"
    with _client(credential, "", redirect_uri) as client:
        url, _ = client.create_authorization_url(
            credential.authorize_url, state=state, code_verifier=verifier
        )
    pending = _pending(session, moment)
    pending[_digest(state)] = {
        "credential": credential.pk,
        "verifier": seal({"code_verifier": verifier}),
        "redirect_uri": redirect_uri,
        "at": moment.timestamp(),
    }
    session[SESSION_KEY] = pending
    return str(url)


def _pending(session: Mapping[str, Any], now: datetime) -> dict[str, dict[str, Any]]:
    """The session's pending consents, those older than the lifetime left out."""
    oldest = (now - STATE_LIFETIME).timestamp()
    found = session.get(SESSION_KEY) or {}
    return {k: v for k, v in found.items() if float(v.get("at", 0)) >= oldest}


def state_credential(state: str) -> int | None:
    """The credential id a state names (its prefix), to show an error on its page."""
    head = state.split(".", 1)[0]
    return int(head) if head.isdigit() else None


def finish_consent(
    session: MutableMapping[str, Any],
    params: Mapping[str, str],
    *,
    now: datetime | None = None,
) -> Connected:
    """Check and spend ``params['state']``, then exchange ``params['code']`` for
    tokens and store them sealed in the credential the state was made for."""
    moment = timezone.now() if now is None else now
    state = params.get("state") or ""
    stored = dict(session.get(SESSION_KEY) or {})
    entry = stored.pop(_digest(state), None)  # single-use: spent before anything else
    session[SESSION_KEY] = _pending({SESSION_KEY: stored}, moment)
    guess = state_credential(state)
    if entry is None:
        raise ConsentError(
            "the consent answer's state is unknown or already used (it must come from a "
            "Connect made in this browser session): nothing was stored; press Connect again",
            guess,
        )
    pk = int(entry["credential"])
    if float(entry["at"]) < (moment - STATE_LIFETIME).timestamp():
        minutes = int(STATE_LIFETIME.total_seconds() // 60)
        raise ConsentError(
            f"the consent took longer than {minutes} minutes and its state expired: "
            "nothing was stored; press Connect again",
            pk,
        )
    credential = Credential.objects.filter(pk=pk).first()
    if credential is None:
        raise ConsentError("the credential this consent was for no longer exists")
    name = credential.name
    error = params.get("error") or ""
    if error:
        described = _described(error, params.get("error_description") or "")
        if error == "access_denied":
            raise ConsentError(
                f"credential {name!r}: the consent was denied at the provider "
                f"({described}): nothing was stored",
                pk,
            )
        raise ConsentError(
            f"credential {name!r}: the provider answered the consent with an error "
            f"({described}): nothing was stored",
            pk,
        )
    code = params.get("code") or ""
    if not code:
        raise ConsentError(
            f"credential {name!r}: the consent answer has neither a code nor an error: "
            "nothing was stored",
            pk,
        )
    verifier = unseal(entry["verifier"], name)["code_verifier"]
    secret = unseal(credential.secrets, name).get("client_secret", "")
    redirect_uri = str(entry["redirect_uri"])
    secrets = (code, verifier, secret)
    with _client(credential, secret, redirect_uri) as client:
        token = _token_call(
            name,
            pk,
            credential.token_url,
            "exchanging the code",
            secrets,
            lambda: client.fetch_token(
                credential.token_url,
                grant_type="authorization_code",
                code=code,
                code_verifier=verifier,
            ),
        )
    access, refresh, expires_at = _parse(token, name, pk, moment)
    store_oauth2_tokens(credential, access, refresh, expires_at)
    granted = str(token.get("scope") or credential.scopes)
    return Connected(credential, tuple(granted.split()), expires_at)


def _described(error: str, description: str) -> str:
    error = " ".join(error.split())[:100]
    description = " ".join(description.split())[:300]
    return f"{error}: {description}" if description else error


def _masked(text: str, secrets: tuple[str, ...]) -> str:
    for value in secrets:
        if value:
            text = text.replace(value, "***")
    return text


def _token_call(
    name: str,
    pk: int | None,
    url: str,
    doing: str,
    secrets: tuple[str, ...],
    call: Any,
) -> Mapping[str, Any]:
    """``call()`` (an authlib token request), its failures as a ``ConsentError``."""
    where = f"credential {name!r}: the token endpoint {url} refused {doing}"
    try:
        token = call()
    except OAuthError as exc:
        detail = _masked(_described(exc.error or "", exc.description or ""), secrets)
        raise ConsentError(f"{where} ({detail}): nothing was stored", pk) from None
    except httpx2.HTTPStatusError as exc:
        raise ConsentError(
            f"{where} (HTTP {exc.response.status_code}): nothing was stored", pk
        ) from None
    except httpx2.HTTPError as exc:
        detail = _masked(f"{type(exc).__name__}: {exc}", secrets)
        raise ConsentError(
            f"credential {name!r}: the token endpoint {url} could not be reached "
            f"({detail}): nothing was stored",
            pk,
        ) from None
    except ValueError:
        raise ConsentError(
            f"{where}: its answer is not a JSON object: nothing was stored", pk
        ) from None
    return dict(token)


def _parse(
    token: Mapping[str, Any], name: str, pk: int | None, now: datetime
) -> tuple[str, str, datetime | None]:
    access = token.get("access_token")
    if not isinstance(access, str) or not access:
        raise ConsentError(
            f"credential {name!r}: the token endpoint's answer has no access_token: "
            "nothing was stored",
            pk,
        )
    refresh = token.get("refresh_token")
    expires_at = None
    try:
        if token.get("expires_in") is not None:
            expires_at = now + timedelta(seconds=float(token["expires_in"]))
    except (TypeError, ValueError):
        expires_at = None
    return access, refresh if isinstance(refresh, str) else "", expires_at


def disconnect(credential: Credential) -> str:
    """Clear ``credential``'s tokens, revoking the refresh (else the access) token at
    its ``revocation_url`` first when it has one; what happened, for people."""
    name = credential.name
    values = unseal(credential.secrets, name)
    token = values.get("refresh_token") or values.get("access_token") or ""
    hint = "refresh_token" if values.get("refresh_token") else "access_token"
    said = ""
    if token and credential.revocation_url:
        secret = values.get("client_secret", "")
        with _client(credential, secret) as client:
            try:
                answer = client.revoke_token(
                    credential.revocation_url, token=token, token_type_hint=hint
                )
            except httpx2.HTTPError as exc:
                detail = _masked(f"{type(exc).__name__}: {exc}", (token, secret))
                said = f"; the revocation endpoint could not be reached ({detail})"
            else:
                if answer.status_code == 200:
                    said = f"; the {hint.replace('_', ' ')} was revoked at the provider"
                else:
                    said = (
                        f"; the revocation endpoint answered HTTP {answer.status_code}, "
                        "so the provider may still honour the token"
                    )
    clear_oauth2_tokens(credential)
    return f"credential {name!r} is disconnected: its tokens are removed{said}"
