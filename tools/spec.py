"""The normalized tool definition: one frozen model for every kind of tool.

Every tool, however it was declared (new YAML form, older flat YAML form,
built-in provider), becomes one frozen :class:`ToolSpec`. The spec is stored in
``Tool.spec`` (``spec.stored()``) and read back with ``ToolSpec.model_validate``.

It holds templates, never secret values: credentials are ``{{env.NAME}}``
references, and a literal credential (a bearer token, API key value or basic
password without any placeholder) is refused.

What is secret is declared here, never guessed from data (docs/security.md): the
auth credential, the headers and query parameters listed in ``secret_headers`` /
``secret_query``, and the env variables listed in ``secret_env``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tools.breaker.core import BreakerConfig
from tools.errors import TemplateError
from tools.mcp.config import McpToolConfig
from tools.paths import PathError
from tools.policy import RetryPolicy
from tools.spec_http import Pagination, ResponseConfig, parse_extract_path
from tools.templating import Placeholder, iter_strings, placeholders

TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
HttpMethod = Literal["GET", "POST", "PUT", "PATCH", "DELETE"]
IDEMPOTENT_METHODS = frozenset({"GET", "PUT", "DELETE"})
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


def json_schema_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The one way a value is checked against a JSON Schema here: draft 2020-12, with
    ``format`` checked. Tool arguments and run inputs both use it, so they agree."""
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


def _check_templates(value: Any) -> None:
    """Raise ``ValueError`` (→ a pydantic error at this field) for a malformed template."""
    for text in iter_strings(value):
        try:
            placeholders(text)
        except TemplateError as exc:
            raise ValueError(exc.message) from exc


def _env_refs(template: Any) -> frozenset[str]:
    """The names of the ``{{env.NAME}}`` placeholders anywhere in ``template``."""
    names: set[str] = set()
    for text in iter_strings(template):
        try:
            names.update(p.env_name for p in placeholders(text) if p.env_name)
        except TemplateError:  # checked when the spec was built; stored specs may be older
            continue
    return frozenset(names)


def _has_placeholder(text: str | None) -> bool:
    return bool(text) and bool(placeholders(text or ""))


class HttpAuth(_Frozen):
    """How a request authenticates. Values are templates (``{{env.NAME}}``).

    ``bearer``: ``Authorization: Bearer <token>``; ``api_key``: ``name: value`` in a
    header or as a query parameter (``in``); ``basic``: username and password;
    ``oauth2``: a bearer token fetched from ``token_url`` with the client credentials
    (``grant: client_credentials``) or a ``refresh_token`` (``grant: refresh_token``).
    The credential is skipped when it renders empty.
    """

    type: Literal["none", "bearer", "api_key", "basic", "oauth2"] = "none"
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

    @model_validator(mode="before")
    @classmethod
    def _oauth2_grant(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("type") == "oauth2" and "grant" not in data:
            return {**data, "grant": "client_credentials"}
        return data

    @model_validator(mode="after")
    def _fields_match_type(self) -> HttpAuth:
        oauth = ["token_url", "client_id", "client_secret", "grant"]
        if self.grant == "refresh_token":
            oauth.append("refresh_token")
        wanted = {
            "none": (),
            "bearer": ("token",),
            "api_key": ("name", "value"),
            "basic": ("username", "password"),
            "oauth2": (*oauth, "scopes"),
        }[self.type]
        required = [f for f in wanted if f != "scopes"]
        fields = ("token", "name", "value", "username", "password", *_OAUTH_FIELDS)
        for field in fields:
            present = getattr(self, field) is not None
            if field in required and not present:
                raise ValueError(f"auth type {self.type!r} needs {field!r}")
            if field not in wanted and present:
                raise ValueError(f"{field!r} does not apply to auth type {self.type!r}")
        _check_templates([getattr(self, f) for f in fields if f not in ("grant", "scopes")])
        secret = {
            "bearer": [self.token],
            "api_key": [self.value],
            "basic": [self.password],
            "oauth2": [self.client_secret, self.refresh_token],
        }.get(self.type, [])
        for literal in secret:
            if literal is not None and literal != "" and not _has_placeholder(literal):
                raise ValueError(
                    "secrets are never written in tool files: use an {{env.NAME}} reference"
                )
        if self.token_url is not None:
            _env_only(self.token_url, "token_url")
        return self


_OAUTH_FIELDS = ("token_url", "client_id", "client_secret", "refresh_token", "grant", "scopes")
BodyType = Literal["json", "form", "multipart", "text"]


class HttpRequest(_Frozen):
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
        _check_templates(value)
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


def split_origin(url: str) -> tuple[str, str]:
    """Split a URL template into its origin part and the rest (path, query).

    The origin ends at the first ``/``, ``?`` or ``#`` outside a placeholder,
    after an optional literal ``scheme://``. ``"/repos/{{o}}"`` → ``("", "/repos/{{o}}")``;
    ``"{{env.B:-https://x.org}}/latest"`` → ``("{{env.B:-https://x.org}}", "/latest")``.
    """
    start = 0
    scheme = _SCHEME.match(url)
    if scheme:
        start = scheme.end()
    elif not url.startswith("{{"):
        return "", url
    depth_free = _mask_placeholders(url)
    for index in range(start, len(url)):
        if depth_free[index] in "/?#":
            return url[:index], url[index:]
    return url, ""


def _mask_placeholders(url: str) -> str:
    """``url`` with the inside of every ``{{...}}`` replaced by spaces (same length)."""
    return re.sub(r"\{\{.*?\}\}", lambda m: " " * len(m.group(0)), url, flags=re.DOTALL)


def _env_only(template: str, what: str) -> list[Placeholder]:
    found = placeholders(template)
    bad = [p.raw for p in found if not p.is_env]
    if bad:
        raise ValueError(
            f"{what} may only use {{{{env.NAME}}}} placeholders, found {{{{{bad[0]}}}}}"
        )
    return found


class HttpConfig(_Frozen):
    """Where and how an http tool calls. An absolute ``request.url`` is split into
    ``base_url`` (its origin) and a relative ``url``."""

    base_url: str = Field(
        "", description="Template; only {{env.NAME}} placeholders.", validate_default=True
    )
    request: HttpRequest = Field(default_factory=HttpRequest)
    auth: HttpAuth = Field(default_factory=HttpAuth)
    response_extract: dict[str, str] = Field(
        default_factory=dict, description="Output key -> dot-path in the (wrapped) response."
    )
    cookies: Literal["none", "step"] = Field(
        "none",
        description="none: no cookie is kept between calls; step: cookies set by a response "
        "are sent again by the same step's later calls (items, retries), never by another step.",
    )
    timeout: float = Field(30.0, gt=0, le=3600, description="Seconds, for the whole attempt.")
    response: ResponseConfig = Field(default_factory=ResponseConfig)
    pagination: Pagination | None = None
    follow_redirects: bool = Field(False, description="Follow 3xx (credentials stay home).")
    max_redirects: int = Field(5, ge=1, le=20)
    breaker: BreakerConfig | None = Field(
        None, description="This tool's circuit breaker thresholds (default: the settings)."
    )

    @model_validator(mode="before")
    @classmethod
    def _absolute_url(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        request = data.get("request")
        url = request.get("url") if isinstance(request, dict) else getattr(request, "url", None)
        if not isinstance(url, str):
            return data
        origin, rest = split_origin(url)
        if not origin:
            return data
        if isinstance(request, dict):
            new_request: Any = {**request, "url": rest}
        else:
            new_request = request.model_copy(update={"url": rest})
        return {**data, "base_url": origin, "request": new_request}

    @field_validator("base_url")
    @classmethod
    def _base_url_env_only(cls, value: str) -> str:
        try:
            found = _env_only(value, "base_url")
        except TemplateError as exc:
            raise ValueError(exc.message) from exc
        if not value:
            raise ValueError("base_url is required (or an absolute request url)")
        if not found and not re.match(r"^https?://[^/?#]+", value):
            raise ValueError(f"base_url must be an http(s) URL, got {value!r}")
        return value

    @field_validator("response_extract")
    @classmethod
    def _extract_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for key, path in value.items():
            if not key or not isinstance(path, str) or not path.strip():
                raise ValueError(f"response_extract {key!r} needs a non-empty dot-path")
            try:
                parse_extract_path(path.strip())
            except PathError as exc:
                raise ValueError(f"response_extract {key!r}: {exc}") from exc
        return {key: path.strip() for key, path in value.items()}


class ToolSpec(_Frozen):
    """A named, typed capability: a name, a JSON Schema of inputs, declared outputs.

    ``outputs`` lists the declared output fields (``[]`` means not declared: any
    path may be read); for http tools it defaults to the keys of
    ``response_extract``. ``idempotent`` defaults to true for GET/PUT/DELETE and
    false for POST/PATCH.
    """

    name: str = Field(pattern=TOOL_NAME_PATTERN)
    kind: Literal["http", "builtin", "mcp"] = "http"
    description: str = ""
    input_schema: dict[str, Any] = Field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    outputs: list[str] = Field(default_factory=list)
    idempotent: bool = True
    retry: RetryPolicy | None = None
    timeout: float = Field(30.0, gt=0, le=3600)
    http: HttpConfig | None = None
    mcp: McpToolConfig | None = Field(None, description="mcp tools: the server and tool name.")
    secret_env: list[str] = Field(
        default_factory=list, description="Env variables whose values are secrets wherever used."
    )

    @field_validator("secret_env")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.match(ENV_NAME_PATTERN, name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    @model_validator(mode="before")
    @classmethod
    def _http_defaults(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("http") is None:
            return data
        http = data["http"]
        get = http.get if isinstance(http, dict) else lambda k, d=None: getattr(http, k, d)
        request = get("request") or {}
        method = request.get("method") if isinstance(request, dict) else request.method
        extract = get("response_extract") or {}
        defaults: dict[str, Any] = {}
        if "outputs" not in data:
            defaults["outputs"] = list(extract)
        if "idempotent" not in data:
            defaults["idempotent"] = str(method or "GET").upper() in IDEMPOTENT_METHODS
        return {**defaults, **data}

    @field_validator("input_schema")
    @classmethod
    def _valid_json_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            Draft202012Validator.check_schema(value)
        except SchemaError as exc:
            path = [str(p) for p in exc.absolute_path]
            raise PydanticCustomError(
                "invalid_json_schema",
                "not a valid JSON Schema at {where}: {detail}",
                {"where": "/".join(path) or "(root)", "detail": exc.message, "schema_path": path},
            ) from exc
        if value.get("type", "object") != "object":
            raise ValueError("the input schema must describe an object (type: object)")
        return value

    @model_validator(mode="after")
    def _kind_matches_config(self) -> ToolSpec:
        if self.kind == "http" and self.http is None:
            raise ValueError("an http tool needs its http configuration")
        if self.kind != "http" and self.http is not None:
            raise ValueError(f"a {self.kind} tool has no http configuration")
        if (self.kind == "mcp") != (self.mcp is not None):
            raise ValueError("an mcp tool (and only an mcp tool) names its MCP server")
        if self.http and self.http.response_extract:
            unknown = [o for o in self.outputs if o not in self.http.response_extract]
            if unknown:
                raise ValueError(f"outputs {unknown} are not keys of response_extract")
        return self

    def env_names(self) -> frozenset[str]:
        """Every env variable this tool reads: its ``{{env.NAME}}`` references (its
        declared configuration) and its ``secret_env``."""
        return frozenset(self.secret_env) | _env_refs(self.stored())

    def secret_env_names(self) -> frozenset[str]:
        """The env variables whose values are secrets: read by the auth credential or a
        declared secret header/query parameter, or listed in ``secret_env``."""
        names = set(self.secret_env)
        if self.http is not None:
            auth = self.http.auth
            names |= _env_refs([auth.token, auth.value, auth.password])
            names |= _env_refs(self.http.request.secret_templates())
        if self.mcp is not None:
            names |= _env_refs(self.mcp.server.secret_header_templates())
        return frozenset(names)

    @property
    def required_inputs(self) -> list[str]:
        return list(self.input_schema.get("required", []))

    def stored(self) -> dict[str, Any]:
        """The JSON form kept in ``Tool.spec`` (templates only, no secret values)."""
        return self.model_dump(mode="json", by_alias=True)

    def describe(self) -> dict[str, Any]:
        """The MCP-shaped description the planner and LLM steps see."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputs": list(self.outputs),
        }
