"""The MCP server definition: how to reach one server (stdio command or streamable
HTTP URL), and which of its values are secrets.

A server file in a tools directory holds one ``mcp_server:`` mapping. Every tool the
server lists becomes a ``ToolSpec(kind="mcp")`` carrying a :class:`McpToolConfig`:
the server definition (templates only, never a resolved secret) and the tool's name
on the server. Values are templates that may use only ``{{env.NAME}}`` placeholders,
like an http tool's base URL, so no step input can choose the command or the host.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tools.errors import TemplateError
from tools.policy import RetryPolicy
from tools.queues import check_queue_name
from tools.templating import iter_strings, placeholders

TOOL_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"  # tools.spec's (which builds on this module)

SERVER_NAME_PATTERN = r"^[a-zA-Z0-9_-]{1,40}$"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"


def env_only(value: Any, what: str) -> None:
    """Raise ``ValueError`` unless every placeholder in ``value`` is ``{{env.NAME}}``."""
    for text in iter_strings(value):
        try:
            found = placeholders(text)
        except TemplateError as exc:
            raise ValueError(f"{what}: {exc.message}") from exc
        bad = [p.raw for p in found if not p.is_env]
        if bad:
            raise ValueError(
                f"{what} may only use {{{{env.NAME}}}} placeholders, found {{{{{bad[0]}}}}}"
            )


class McpServer(BaseModel):
    """One MCP server: ``command`` (+ ``args``, ``env``) for stdio, or ``url``
    (+ ``headers``) for streamable HTTP — exactly one of the two.

    Secrets are declared: ``secret_env`` names env variables whose values are secret
    (as for http tools), ``secret_headers`` names headers whose values are secret (the
    env variables they read become secret too). ``timeout`` (seconds per call) and
    ``retry`` apply to every tool of the server unless a step sets its own timeout.
    ``idempotent`` overrides what the server's ``idempotentHint`` annotations say.
    ``queue`` routes the steps of every tool of the server to that Celery queue.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=SERVER_NAME_PATTERN, description="Prefix of its tool names.")
    description: str = ""
    command: str | None = Field(None, description="stdio: the executable.")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments.")
    env: dict[str, str] = Field(default_factory=dict, description="stdio: extra environment.")
    url: str | None = Field(None, description="streamable HTTP: the endpoint URL.")
    headers: dict[str, str] = Field(default_factory=dict, description="HTTP: request headers.")
    secret_headers: list[str] = Field(default_factory=list)
    secret_env: list[str] = Field(default_factory=list)
    timeout: float = Field(30.0, gt=0, le=3600, description="Seconds per call.")
    retry: RetryPolicy | None = None
    idempotent: bool | None = Field(None, description="None: from the tools' annotations.")
    queue: str | None = Field(
        None, description="The Celery queue of every tool of the server (docs/limits.md)."
    )
    deprecated: dict[str, str | None] = Field(
        default_factory=dict,
        description="Deprecated tools by their name on the server -> the registered name of "
        "the replacement (or null).",
    )

    @field_validator("command", "url", "args", "env", "headers")
    @classmethod
    def _env_templates_only(cls, value: Any, info: Any) -> Any:
        env_only(value, info.field_name)
        return value

    @field_validator("env")
    @classmethod
    def _env_keys(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            if not re.match(ENV_NAME_PATTERN, name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    @field_validator("secret_env")
    @classmethod
    def _secret_env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.match(ENV_NAME_PATTERN, name):
                raise ValueError(f"{name!r} is not an environment variable name")
        return value

    @field_validator("queue")
    @classmethod
    def _queue_name(cls, value: str | None) -> str | None:
        return check_queue_name(value)

    @field_validator("deprecated")
    @classmethod
    def _deprecated_names(cls, value: dict[str, str | None]) -> dict[str, str | None]:
        for tool, replacement in value.items():
            if not tool or len(tool) > 128:
                raise ValueError(f"deprecated tool name {tool!r} must be 1 to 128 characters")
            if replacement is not None and not re.match(TOOL_NAME_PATTERN, replacement):
                raise ValueError(
                    f"replacement {replacement!r} of {tool!r} is not a tool name "
                    f"({TOOL_NAME_PATTERN})"
                )
        return value

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("give either 'command' (stdio) or 'url' (streamable HTTP)")
        if self.url is not None and (self.args or self.env):
            raise ValueError("'args' and 'env' apply to a stdio server ('command') only")
        if self.command is not None and self.headers:
            raise ValueError("'headers' apply to an HTTP server ('url') only")
        literal = self.url is not None and not placeholders(self.url)
        if literal and not re.match(r"^https?://[^/?#]+", self.url or ""):
            raise ValueError(f"url must be an http(s) URL, got {self.url!r}")
        names = {h.lower() for h in self.headers}
        for header in self.secret_headers:
            if header.lower() not in names:
                raise ValueError(f"secret_headers names {header!r}, which is not in headers")
        return self

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    def secret_header_templates(self) -> list[str]:
        wanted = {h.lower() for h in self.secret_headers}
        return [v for k, v in sorted(self.headers.items()) if k.lower() in wanted]


class McpToolConfig(BaseModel):
    """How an ``mcp`` tool is called: its server and its name there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    server: McpServer
    tool: str = Field(min_length=1, description="The tool's name on the server.")
