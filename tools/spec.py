"""The normalized tool definition: one frozen model for every kind of tool.

Every tool, however it was declared (new YAML form, older flat YAML form,
built-in provider), becomes one frozen :class:`ToolSpec`. The spec is stored in
``Tool.spec`` (``spec.stored()``) and read back with ``ToolSpec.model_validate``.

It holds templates, never secret values: credentials are ``{{env.NAME}}``
references, and a literal credential (a bearer token, API key value or basic
password without any placeholder) is refused.

What is secret is declared here, never guessed from data (docs/security.md): the
auth credential, the headers and query parameters listed in ``secret_headers`` /
``secret_query``, and the env variables listed in ``secret_env``; ``tools.secrets``
holds the rule that reads these declarations.
"""

from __future__ import annotations

import re
from functools import cached_property
from typing import Any, Literal

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from tools.breaker.core import BreakerConfig
from tools.errors import TemplateError
from tools.mcp.config import McpToolConfig
from tools.output_types import extract_type, output_types_problem
from tools.paths import PathError
from tools.policy import RetryPolicy
from tools.queues import check_queue_name
from tools.ratelimit.config import RateLimitConfig
from tools.secrets import credential_params, secret_env_names
from tools.spec_http import Pagination, ResponseConfig, parse_extract_path
from tools.spec_request import (  # HttpAuth and HttpRequest are part of the tool format
    FrozenModel,
    HttpAuth,
    HttpRequest,
    env_only,
    env_refs,
)

TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
IDEMPOTENT_METHODS = frozenset({"GET", "PUT", "DELETE"})
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


def json_schema_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The one way a value is checked against a JSON Schema here: draft 2020-12, with
    ``format`` checked. Tool arguments and run inputs both use it, so they agree."""
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


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


class HttpConfig(FrozenModel):
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
        request: Any = data.get("request")  # a dict from YAML, or an HttpRequest model
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
            found = env_only(value, "base_url")
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


class ToolSpec(FrozenModel):
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
    output_types: dict[str, dict[str, Any]] | None = Field(
        None,
        description="Output field -> JSON Schema of its value; the validator checks every "
        "mapping of a field against the parameter it feeds (docs/tools.md#output-types). "
        "Omitted: the types are unknown (a `$status` or `$headers.NAME` extraction is "
        "typed all the same).",
    )
    idempotent: bool = True
    retry: RetryPolicy | None = None
    timeout: float = Field(30.0, gt=0, le=3600)
    http: HttpConfig | None = None
    mcp: McpToolConfig | None = Field(None, description="mcp tools: the server and tool name.")
    secret_env: list[str] = Field(
        default_factory=list, description="Env variables whose values are secrets wherever used."
    )
    deprecated: bool = Field(
        False,
        description="No longer to be used: the planner does not offer it and the validator "
        "warns on every use (it still runs).",
    )
    replacement: str | None = Field(
        None, pattern=TOOL_NAME_PATTERN, description="A deprecated tool's successor, if any."
    )
    queue: str | None = Field(
        None,
        description="The Celery queue its steps' tasks go to (workers started with `-Q NAME` "
        "run them); omitted: the workflow's queue, else the default one (docs/limits.md).",
    )
    rate_limit: RateLimitConfig | None = Field(
        None,
        description="Calls allowed per period, shared by every worker, by key "
        "(tools.ratelimit.config; docs/limits.md).",
    )

    @field_validator("queue")
    @classmethod
    def _queue_name(cls, value: str | None) -> str | None:
        return check_queue_name(value)

    @model_validator(mode="after")
    def _rate_limit_key(self) -> ToolSpec:
        limit = self.rate_limit
        if limit is None:
            return self
        if self.kind != "http":
            raise PydanticCustomError(
                "rate_limit_kind",
                "a rate limit paces HTTP requests: a {kind} tool has none",
                {"kind": self.kind, "schema_path": ["rate_limit"]},
            )
        name = limit.input_name
        properties = self.input_schema.get("properties") or {}
        if name is not None and name not in properties:
            known = ", ".join(sorted(properties)) or "none"
            raise PydanticCustomError(
                "rate_limit_key",
                "$input.{name} is not an input of this tool (its inputs: {known})",
                {"name": name, "known": known, "schema_path": ["rate_limit", "key"]},
            )
        return self

    @model_validator(mode="after")
    def _lifecycle(self) -> ToolSpec:
        if self.replacement is not None and not self.deprecated:
            raise ValueError("`replacement` is only for a deprecated tool (set `deprecated: true`)")
        if self.replacement == self.name:
            raise ValueError(f"tool {self.name!r} cannot be its own replacement")
        return self

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

    @field_validator("output_types")
    @classmethod
    def _valid_output_types(
        cls, value: dict[str, dict[str, Any]] | None
    ) -> dict[str, dict[str, Any]] | None:
        problem = None if value is None else output_types_problem(value)
        if problem is not None:
            where, detail = problem
            raise PydanticCustomError(
                "invalid_output_types", "{detail}", {"detail": detail, "schema_path": where}
            )
        return value

    @model_validator(mode="after")
    def _output_types_declared(self) -> ToolSpec:
        unknown = sorted(set(self.output_types or ()) - set(self.outputs)) if self.outputs else []
        if unknown:
            raise PydanticCustomError(
                "output_types_unknown",
                "output_types names {unknown}, which are not outputs of this tool "
                "(its outputs: {known})",
                {
                    "unknown": ", ".join(unknown),
                    "known": ", ".join(self.outputs),
                    "schema_path": ["output_types", unknown[0]],
                },
            )
        return self

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
        declared configuration) and its ``secret_env``. Worked out once per spec (a
        frozen model): every run reads it for every tool of its registry."""
        return self._declared_env

    @cached_property
    def _declared_env(self) -> frozenset[str]:
        return frozenset(self.secret_env) | env_refs(self.stored())

    def secret_env_names(self) -> frozenset[str]:
        """The env variables whose values are secrets (the rule: ``tools.secrets``):
        read by the auth credential or a declared secret header/query parameter, or
        listed in ``secret_env``. Worked out once per spec, like ``env_names``."""
        return self._declared_secret_env

    @cached_property
    def _declared_secret_env(self) -> frozenset[str]:
        return secret_env_names(self)

    def credential_name(self) -> str | None:
        """The stored credential this tool's auth names (``auth: {credential: NAME}``)."""
        return self.http.auth.credential if self.http is not None else None

    def credential_params(self) -> frozenset[str]:
        """The arguments its secret templates read: the only ones a workflow may map a
        credential to (the rule: ``tools.secrets.credential_params``). Cached."""
        return self._credential_params

    @cached_property
    def _credential_params(self) -> frozenset[str]:
        return credential_params(self)

    def output_type(self, field: str) -> dict[str, Any] | None:
        """The JSON Schema of one output field: declared in ``output_types``, else what a
        ``response_extract`` path gives by itself (``$status``: an integer); ``None``:
        unknown."""
        if self.output_types and field in self.output_types:
            return self.output_types[field]
        if self.http is not None and field in self.http.response_extract:
            return extract_type(self.http.response_extract[field])
        return None

    @property
    def required_inputs(self) -> list[str]:
        return list(self.input_schema.get("required", []))

    def stored(self) -> dict[str, Any]:
        """The JSON form kept in ``Tool.spec`` (templates only, no secret values).
        ``output_types`` is left out while unset, so the tools stored before it existed
        read the same."""
        skip = {"output_types"} if self.output_types is None else None
        return self.model_dump(mode="json", by_alias=True, exclude=skip)

    def describe(self) -> dict[str, Any]:
        """The MCP-shaped description the planner and LLM steps see."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputs": list(self.outputs),
        }
