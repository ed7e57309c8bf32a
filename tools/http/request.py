"""Rendering an http tool's request: URL, query, headers and static credentials.

A tool whose auth names a stored credential (``auth: {credential: NAME}``) reads it
here, once per call, from the store (:mod:`tools.credentials.store`): its type says
how it is sent, its decrypted values are registered with ``ctx.redactor`` first.

Secrets are what the tool declares (the rule: ``tools.secrets``): the auth
credential, the values of ``secret_headers`` / ``secret_query``, and the values of
its secret env variables; each is registered with ``ctx.redactor`` as it is
rendered. Non-secret configuration (an org name, a base URL) is not.
Header values must be ASCII (RFC 9110 leaves other bytes undefined): a value that
renders to other text is a ``template_error`` naming the header, never sent.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import Any

import httpx

from tools.calls import ToolCallContext
from tools.credentials.crypto import CredentialKeyError
from tools.credentials.store import (
    ResolvedCredential,
    UnknownCredential,
    credential_secret_values,
    resolve_credential,
)
from tools.credentials.vault import VaultError
from tools.errors import TemplateError, ToolAuthFailed, ToolConfigError, ToolUnreachable
from tools.http.bodies import Body, render_body
from tools.redaction import is_sensitive_header
from tools.secrets import basic_token, register_tool_secrets
from tools.spec import HttpConfig, ToolSpec
from tools.templating import render, render_text, render_url_path, to_text

_BAD_HEADER_CHARS = re.compile(r"[\r\n\0]")
ACCEPT_ENCODING = "gzip, deflate, identity"
"""The codings asked for: exactly the ones :mod:`tools.http.transport` decodes."""


@dataclass(frozen=True)
class OAuth2Client:
    """The OAuth2 client a call gets its access token with (``tools.http.oauth2``):
    rendered from the tool's templates or read from a stored credential."""

    token_url: str
    client_id: str
    client_secret: str = field(repr=False)
    refresh_token: str = field(repr=False)
    scopes: tuple[str, ...]


@dataclass(frozen=True)
class StoredOAuth2:
    """A stored OAuth2 credential as the call read it: its name, the tool using it,
    and the access token every process shares (``tools.http.shared_token``)."""

    tool: str
    name: str
    access_token: str = field(repr=False)
    expires_at: datetime | None


@dataclass
class PreparedRequest:
    """The rendered request, before sending.

    ``credential_headers`` / ``credential_params`` name what carries a credential (the
    auth block's, and headers whose name says so: Authorization, Cookie, X-API-Key,
    *-Token…), so a redirect to another origin can drop exactly those.
    """

    method: str
    url: str
    params: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: Body = field(default_factory=Body)
    credential_headers: set[str] = field(default_factory=set)
    credential_params: set[str] = field(default_factory=set)
    oauth2: OAuth2Client | None = None  # the OAuth2 client whose token is added when sent
    # a stored OAuth2 credential: its token is shared by every process (shared_token)
    stored_oauth2: StoredOAuth2 | None = None

    @property
    def json(self) -> Any:
        return self.body.json

    @cached_property
    def merged_url(self) -> httpx.URL:
        """``url`` with ``params`` merged into its own query (httpx's ``params=`` would
        replace a query already in the URL: a next-page link's, or one written in
        ``request.url``). Parsed once per request: read it only once the request is
        complete (``prepare_request`` and the OAuth2 step have run)."""
        url = httpx.URL(self.url)
        return url.copy_merge_params(tuple(self.params)) if self.params else url


def prepare_request(spec: ToolSpec, arguments: dict, ctx: ToolCallContext) -> PreparedRequest:
    """Render URL, query, headers, body and the static credentials (not OAuth2 tokens,
    which :mod:`tools.http.oauth2` adds); register the declared secrets."""
    http = spec.http
    if http is None:
        raise ToolConfigError(f"tool {spec.name!r} is not an http tool")
    register_tool_secrets(ctx.redactor, spec, ctx.env)
    request = http.request
    url = build_url(spec.name, http, arguments, ctx)
    prepared = PreparedRequest(method=request.method, url=url)
    prepared.params = _render_query(request.query, arguments, ctx)
    for name, value in prepared.params:
        if name in request.secret_query:
            ctx.redactor.add_secret(value)
    prepared.headers["Accept-Encoding"] = ACCEPT_ENCODING
    for name, template in request.headers.items():
        value = render_text(template, arguments, env=ctx.env)
        if value:
            prepared.headers[name] = value
            if request.is_secret_header(name):
                ctx.redactor.add_secret(value)
            if is_sensitive_header(name):  # Authorization, Cookie, X-API-Key, *-Token…
                prepared.credential_headers.add(name.lower())
    prepared.body = render_body(request, arguments, ctx)
    typed = any(k.lower() == "content-type" for k in prepared.headers)
    if prepared.body.content is not None and prepared.body.content_type and not typed:
        prepared.headers["Content-Type"] = prepared.body.content_type
    if request.idempotency_header and ctx.idempotency_key:
        prepared.headers[request.idempotency_header] = ctx.idempotency_key
    _apply_auth(spec.name, http, prepared, arguments, ctx)
    check_headers(spec.name, prepared.headers)
    return prepared


def check_headers(tool: str, headers: dict[str, str]) -> None:
    """Refuse a header that could add headers (CR, LF, NUL) or is not ASCII."""
    for name, value in headers.items():
        if _BAD_HEADER_CHARS.search(name) or _BAD_HEADER_CHARS.search(value):
            raise TemplateError(
                f"tool {tool!r}: header {name!r} renders to a value with a line break "
                "or NUL character; a value cannot add headers"
            )
        if not (name + value).isascii():
            raise TemplateError(
                f"tool {tool!r}: header {name!r} renders to non-ASCII text; HTTP header "
                "values must be ASCII: percent-encode the value or send it in the body"
            )


def build_url(name: str, http: HttpConfig, arguments: dict, ctx: ToolCallContext) -> str:
    base = render_text(http.base_url, {}, env=ctx.env)
    path = render_url_path(http.request.url, arguments, ctx.env, ctx.max_output_bytes)
    if not path:
        url = base
    elif path.startswith(("?", "#")):
        url = base.rstrip("/") + path
    else:
        url = base.rstrip("/") + "/" + path.lstrip("/")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise ToolConfigError(_bad_base(name, http, ctx, url)) from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise ToolConfigError(_bad_base(name, http, ctx, url))
    return url


def _bad_base(name: str, http: HttpConfig, ctx: ToolCallContext, url: str) -> str:
    shown = ctx.redactor.scrub_text(url)
    return (
        f"tool {name!r}: base_url {http.base_url!r} renders to {shown!r}, "
        "not an http(s) URL (is its environment variable set?)"
    )


def _render_query(
    query: dict[str, Any], arguments: dict, ctx: ToolCallContext
) -> list[tuple[str, str]]:
    """Query params; a value rendering ``None`` drops the param, a list repeats it."""
    params: list[tuple[str, str]] = []
    for name, template in query.items():
        value = render(template, arguments, env=ctx.env, max_bytes=ctx.max_output_bytes)
        items = value if isinstance(value, list) else [value]
        params.extend((name, to_text(item)) for item in items if item is not None)
    return params


def _apply_auth(
    tool: str,
    http: HttpConfig,
    prepared: PreparedRequest,
    arguments: dict,
    ctx: ToolCallContext,
) -> None:
    """Add a static credential; skipped when it renders empty. It is a secret.
    An OAuth2 one is kept for the token (``prepared.oauth2``)."""
    auth = http.auth
    if auth.type == "credential":
        _apply_stored(tool, auth.credential or "", prepared, ctx)
        return
    if auth.type == "oauth2":
        prepared.oauth2 = _template_client(http, ctx)
        return

    def text(template: str | None) -> str:
        return render_text(template or "", arguments, env=ctx.env)

    if auth.type == "bearer":
        token = text(auth.token)
        if token:
            ctx.redactor.add_secret(token)
            set_credential_header(prepared, "Authorization", f"Bearer {token}")
    elif auth.type == "api_key":
        key = text(auth.value)
        if key:
            ctx.redactor.add_secret(key)
            if auth.in_ == "query":
                prepared.params.append((auth.name or "", key))
                prepared.credential_params.add(auth.name or "")
            else:
                set_credential_header(prepared, auth.name or "", key)
    elif auth.type == "basic":
        user, password = text(auth.username), text(auth.password)
        if user or password:
            ctx.redactor.add_basic_auth(user, password)
            set_credential_header(prepared, "Authorization", f"Basic {basic_token(user, password)}")


def set_credential_header(prepared: PreparedRequest, name: str, value: str) -> None:
    prepared.headers[name] = value
    prepared.credential_headers.add(name.lower())


def _template_client(http: HttpConfig, ctx: ToolCallContext) -> OAuth2Client:
    auth = http.auth

    def text(template: str | None) -> str:
        return render_text(template or "", {}, env=ctx.env)

    client = OAuth2Client(
        token_url=text(auth.token_url),
        client_id=text(auth.client_id),
        client_secret=text(auth.client_secret),
        refresh_token=text(auth.refresh_token),
        scopes=tuple(auth.scopes or ()),
    )
    for secret in (client.client_secret, client.refresh_token):
        ctx.redactor.add_secret(secret)
    return client


def stored_credential(tool: str, name: str, ctx: ToolCallContext) -> ResolvedCredential:
    """Credential ``name`` as it is now, its values registered with ``ctx.redactor``;
    a ``ToolConfigError`` naming the tool and the credential when it cannot be used."""
    try:
        credential = resolve_credential(name)
    except UnknownCredential as exc:
        raise ToolConfigError(f"tool {tool!r}: {exc.message}") from None
    except CredentialKeyError as exc:
        raise ToolConfigError(f"tool {tool!r}: {exc.message}") from None
    except VaultError as exc:
        if exc.unreachable:  # the step's retry policy may try again, a bounded number of times
            raise ToolUnreachable(f"tool {tool!r}: {exc.message}", not_sent=True) from None
        raise ToolConfigError(f"tool {tool!r}: {exc.message}") from None
    for value in credential_secret_values(credential):
        ctx.redactor.add_secret(value)
    if credential.needs_reconnect:
        raise ToolAuthFailed(
            f"tool {tool!r}: credential {name!r} needs to be reconnected (its value stopped "
            "working): set or connect it again in the admin",
            status=401,
        )
    if credential.type == "oauth2_authorization_code" and not (
        credential.secret("access_token") or credential.secret("refresh_token")
    ):
        raise ToolConfigError(
            f"tool {tool!r}: credential {name!r} is not connected: press Connect on its "
            "page in the admin (docs/credentials.md)"
        )
    missing = credential.missing()
    if missing:
        raise ToolConfigError(
            f"tool {tool!r}: credential {name!r} has no {' or '.join(missing)} set: "
            "set it in the admin"
        )
    return credential


def _apply_stored(tool: str, name: str, prepared: PreparedRequest, ctx: ToolCallContext) -> None:
    """Send stored credential ``name`` the way its type says."""
    credential = stored_credential(tool, name, ctx)
    kind, secret = credential.type, credential.secret
    if kind == "bearer":
        set_credential_header(prepared, "Authorization", f"Bearer {secret('token')}")
    elif kind == "basic":
        token = basic_token(credential.username, secret("password"))
        set_credential_header(prepared, "Authorization", f"Basic {token}")
    elif kind == "query" or (kind == "api_key" and credential.location == "query"):
        prepared.params.append((credential.key_name, secret("value")))
        prepared.credential_params.add(credential.key_name)
    elif kind in ("header", "api_key"):
        set_credential_header(prepared, credential.key_name, secret("value"))
    else:  # oauth2_client_credentials, oauth2_authorization_code (its refresh token)
        prepared.oauth2 = OAuth2Client(
            token_url=credential.token_url,
            client_id=credential.client_id,
            client_secret=secret("client_secret"),
            refresh_token=secret("refresh_token") if kind == "oauth2_authorization_code" else "",
            scopes=credential.scopes,
        )
        prepared.stored_oauth2 = StoredOAuth2(
            tool=tool,
            name=credential.name,
            access_token=secret("access_token"),
            expires_at=credential.expires_at,
        )
