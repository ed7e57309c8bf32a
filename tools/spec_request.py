"""The request half of an http tool's definition: its authentication and its request
template. Values are templates (``{{env.NAME}}``, ``{{argument}}``), never secrets;
what is secret is declared here (the auth credential, ``secret_headers``,
``secret_query``). ``tools.spec`` builds the whole tool definition from these.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)

from tools.credentials.kinds import CREDENTIAL_NAME_PATTERN
from tools.errors import TemplateError
from tools.templating import Placeholder, iter_strings, placeholders

HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]


class FrozenModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def check_templates(value: Any) -> None:
    """Raise ``ValueError`` (→ a pydantic error at this field) for a malformed template."""
    for text in iter_strings(value):
        try:
            placeholders(text)
        except TemplateError as exc:
            raise ValueError(exc.message) from exc


def env_refs(template: Any) -> frozenset[str]:
    """The names of the ``{{env.NAME}}`` placeholders anywhere in ``template``."""
    names: set[str] = set()
    for text in iter_strings(template):
        try:
            names.update(p.env_name for p in placeholders(text) if p.env_name)
        except TemplateError:  # checked when the spec was built; stored specs may be older
            continue
    return frozenset(names)


def has_placeholder(text: str | None) -> bool:
    return bool(text) and bool(placeholders(text or ""))


class HttpAuth(FrozenModel):
    """How a request authenticates. Values are templates (``{{env.NAME}}``).

    ``bearer``: ``Authorization: Bearer <token>``; ``api_key``: ``name: value`` in a
    header or as a query parameter (``in``); ``basic``: username and password;
    ``oauth2``: a bearer token fetched from ``token_url`` with the client credentials
    (``grant: client_credentials``) or a ``refresh_token`` (``grant: refresh_token``);
    ``credential``: a stored credential, by name (``auth: {credential: github_app}``),
    whose type says how it is sent and whose values are read at call time
    (docs/credentials.md). The credential is skipped when it renders empty.
    """

    type: Literal["none", "bearer", "api_key", "basic", "oauth2", "credential"] = "none"
    credential: str | None = Field(None, description="credential: a stored credential's name.")
    token: str | None = Field(None, description="bearer: the token template.")
    in_: Literal["header", "query"] = Field("header", alias="in")
    name: str | None = Field(None, description="api_key: header or query parameter name.")
    value: str | None = Field(None, description="api_key: the key template.")
    username: str | None = Field(None, description="basic: user name template.")
    password: str | None = Field(None, description="basic: password template.")
    token_url: str | None = Field(None, description="oauth2: token endpoint (env only).")
    client_id: str | None = Field(None, description="oauth2: client id template.")
    client_secret: str | None = Field(None, description="oauth2: client secret template.")
    refresh_token: str | None = Field(None, description="oauth2 refresh_token grant.")
    grant: Literal["client_credentials", "refresh_token"] | None = None
    scopes: list[str] | None = Field(None, description="oauth2: scopes asked for.")

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> Any:
        """Leave ``credential`` out unless set: the stored form (and so the definition
        hash) of a tool that uses no stored credential is what it was before there was one."""
        data = handler(self)
        if isinstance(data, dict) and self.credential is None:
            data.pop("credential", None)
        return data

    @model_validator(mode="before")
    @classmethod
    def _oauth2_grant(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("type") == "oauth2" and "grant" not in data:
            return {**data, "grant": "client_credentials"}
        if isinstance(data, dict) and "credential" in data and "type" not in data:
            return {**data, "type": "credential"}
        return data

    @field_validator("credential")
    @classmethod
    def _credential_name(cls, value: str | None) -> str | None:
        if value is not None and not re.match(CREDENTIAL_NAME_PATTERN, value):
            raise ValueError(
                f"{value!r} is not a credential name: lower-case letters, digits, `_` and "
                "`-` (e.g. github_app)"
            )
        return value

    @model_validator(mode="after")
    def _fields_match_type(self) -> HttpAuth:
        if self.credential is not None and self.type != "credential":
            raise ValueError(
                f"'credential' does not apply to auth type {self.type!r}: a stored "
                f"credential stands alone (auth: {{credential: {self.credential}}}) and "
                "its type says how it is sent"
            )
        oauth = ["token_url", "client_id", "client_secret", "grant"]
        if self.grant == "refresh_token":
            oauth.append("refresh_token")
        wanted = {
            "none": (),
            "bearer": ("token",),
            "api_key": ("name", "value"),
            "basic": ("username", "password"),
            "oauth2": (*oauth, "scopes"),
            "credential": ("credential",),
        }[self.type]
        required = [f for f in wanted if f != "scopes"]
        fields = ("token", "name", "value", "username", "password", *_OAUTH_FIELDS, "credential")
        for field in fields:
            present = getattr(self, field) is not None
            if field in required and not present:
                raise ValueError(f"auth type {self.type!r} needs {field!r}")
            if field not in wanted and present:
                raise ValueError(f"{field!r} does not apply to auth type {self.type!r}")
        templates = [f for f in fields if f not in ("grant", "scopes", "credential")]
        check_templates([getattr(self, f) for f in templates])
        secret = {
            "bearer": [self.token],
            "api_key": [self.value],
            "basic": [self.password],
            "oauth2": [self.client_secret, self.refresh_token],
        }.get(self.type, [])
        for literal in secret:
            if literal is not None and literal != "" and not has_placeholder(literal):
                raise ValueError(
                    "secrets are never written in tool files: use an {{env.NAME}} reference"
                )
        if self.token_url is not None:
            env_only(self.token_url, "token_url")
        return self


_OAUTH_FIELDS = ("token_url", "client_id", "client_secret", "refresh_token", "grant", "scopes")
BodyType = Literal["json", "form", "multipart", "text"]


class HttpRequest(FrozenModel):
    """The request template. ``url`` is relative to ``HttpConfig.base_url``."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, coerce_numbers_to_str=True
    )

    method: HttpMethod = "GET"
    url: str = Field("", description="Path (and optional query) template, values encoded.")
    query: dict[str, Any] = Field(default_factory=dict, description="None-valued params dropped.")
    headers: dict[str, str] = Field(default_factory=dict, description="Empty values dropped.")
    body: Any = Field(None, description="Body template; None sends no body.")
    body_type: BodyType = Field(
        "json", description="json, form (urlencoded), multipart (form-data) or text."
    )
    files: dict[str, str] = Field(
        default_factory=dict,
        description="multipart: field -> file path template, inside FLOWPILOT_DATA_DIRS.",
    )
    content_type: str | None = Field(None, description="text: the Content-Type sent.")
    idempotency_header: str | None = Field(
        None, description="Header carrying the step's idempotency key, e.g. Idempotency-Key."
    )
    secret_headers: list[str] = Field(
        default_factory=list, description="Headers whose values are secrets (masked when shown)."
    )
    secret_query: list[str] = Field(
        default_factory=list, description="Query parameters whose values are secrets."
    )

    @field_validator("method", mode="before")
    @classmethod
    def _upper(cls, value: Any) -> Any:
        return value.upper() if isinstance(value, str) else value

    @field_validator("url", "query", "headers", "body", "files")
    @classmethod
    def _templates_parse(cls, value: Any) -> Any:
        check_templates(value)
        return value

    @model_validator(mode="after")
    def _secrets_name_declared(self) -> HttpRequest:
        headers = {name.lower() for name in self.headers}
        for name in self.secret_headers:
            if name.lower() not in headers:
                raise ValueError(f"secret_headers names {name!r}, which is not in headers")
        for name in self.secret_query:
            if name not in self.query:
                raise ValueError(f"secret_query names {name!r}, which is not in query")
        return self

    def secret_templates(self) -> list[Any]:
        """The templates of the headers and query parameters declared secret."""
        secret_headers = {name.lower() for name in self.secret_headers}
        found = [v for k, v in self.headers.items() if k.lower() in secret_headers]
        return found + [self.query[name] for name in self.secret_query]

    def is_secret_header(self, name: str) -> bool:
        return name.lower() in {h.lower() for h in self.secret_headers}

    @model_validator(mode="after")
    def _body_fits_type(self) -> HttpRequest:
        whole = isinstance(self.body, str) and self.body.strip().startswith("{{")
        if self.files and self.body_type != "multipart":
            raise ValueError("'files' needs body_type: multipart")
        mapping = self.body is None or whole or isinstance(self.body, dict)
        if self.body_type in ("form", "multipart") and not mapping:
            raise ValueError(f"body_type {self.body_type!r} needs a mapping body")
        if self.body_type == "text" and self.body is not None and not isinstance(self.body, str):
            raise ValueError("body_type 'text' needs a string body")
        if self.content_type is not None and self.body_type != "text":
            raise ValueError("content_type applies to body_type 'text' only")
        return self


def env_only(template: str, what: str) -> list[Placeholder]:
    """The placeholders of ``template``; a ``ValueError`` unless all are ``{{env.NAME}}``."""
    found = placeholders(template)
    bad = [p.raw for p in found if not p.is_env]
    if bad:
        raise ValueError(
            f"{what} may only use {{{{env.NAME}}}} placeholders, found {{{{{bad[0]}}}}}"
        )
    return found
