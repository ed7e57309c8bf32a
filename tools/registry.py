"""A per-run view of the tools: specs plus how to call them (DESIGN §5, STYLE §10).

Nothing here is module state: a run builds its own :class:`ToolRegistry` (usually
``ToolRegistry.from_db()``) and its own :class:`ToolCallContext` (env, redactor,
HTTP client), and passes both explicitly.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from tools.builtin import load_providers
from tools.errors import (
    FlowpilotError,
    ToolCallFailed,
    ToolConfigError,
    ToolInputError,
    ToolNotFound,
)
from tools.redaction import Redactor
from tools.spec import ToolSpec

if TYPE_CHECKING:
    from tools.builtin.base import BuiltinProvider

logger = logging.getLogger("flowpilot.tools")


@dataclass(frozen=True)
class ToolCallContext:
    """Everything one tool call may use, built per run by the caller.

    ``env`` is where ``{{env.NAME}}`` is read (pass ``os.environ`` or a curated
    mapping); ``redactor`` collects the secret values used; ``http`` is the run's
    client; ``timeout`` overrides the tool's own; ``idempotency_key`` is sent in
    the tool's ``idempotency_header``; ``output_dir``/``data_dirs`` bound where
    built-in tools may write and read.
    """

    env: Mapping[str, str]
    redactor: Redactor
    http: httpx.Client
    timeout: float | None = None
    idempotency_key: str | None = None
    max_response_bytes: int = 10 * 1024 * 1024
    output_dir: Path | None = None
    data_dirs: tuple[Path, ...] = ()


@dataclass(frozen=True)
class ToolResult:
    """A tool's output. ``request`` (http tools) is ``{method, url, status, elapsed_ms}``
    with the URL redacted; ``truncated`` flags an oversized body cut at the limit."""

    output: Any
    truncated: bool = False
    request: dict | None = None


def _json_path(path: Iterable[Any]) -> str:
    text = "$"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def schema_validator(spec: ToolSpec) -> Draft202012Validator:
    return Draft202012Validator(
        spec.input_schema, format_checker=Draft202012Validator.FORMAT_CHECKER
    )


def validate_arguments(
    spec: ToolSpec, arguments: Any, *, validator: Draft202012Validator | None = None
) -> None:
    """Check ``arguments`` against the tool's input schema; report every problem at once."""
    if not isinstance(arguments, Mapping):
        raise ToolInputError(f"tool {spec.name!r}: arguments must be an object")
    validator = validator or schema_validator(spec)
    errors = sorted(validator.iter_errors(dict(arguments)), key=lambda e: list(e.absolute_path))
    if errors:
        lines = [f"{_json_path(e.absolute_path)}: {e.message}" for e in errors]
        raise ToolInputError(f"tool {spec.name!r}: invalid arguments: " + "; ".join(lines))


class ToolRegistry:
    """Immutable per-run view: specs + how to call them. No module-level state.

    ``specs`` are http (or declared) tools; each provider contributes its
    built-in tools. A name defined twice raises ``ToolConfigError``. ``exclude``
    hides tools by name (``from_db`` uses it for disabled built-in rows).
    """

    def __init__(
        self,
        specs: Iterable[ToolSpec],
        providers: Iterable[BuiltinProvider] = (),
        *,
        exclude: Iterable[str] = (),
    ) -> None:
        hidden = set(exclude)
        self._specs: dict[str, ToolSpec] = {}
        self._providers: dict[str, BuiltinProvider] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        for spec in specs:
            if spec.name not in hidden:
                self._add(spec)
        for provider in providers:
            for spec in provider.specs():
                if spec.name not in hidden:
                    self._add(spec)
                    self._providers[spec.name] = provider

    def _add(self, spec: ToolSpec) -> None:
        if spec.name in self._specs:
            raise ToolConfigError(f"tool {spec.name!r} is defined twice")
        self._specs[spec.name] = spec

    @classmethod
    def from_db(cls, *, providers: Iterable[BuiltinProvider] | None = None) -> ToolRegistry:
        """Enabled http ``Tool`` rows plus the built-in providers.

        ``providers`` defaults to ``settings.FLOWPILOT_BUILTIN_PROVIDERS``. A
        built-in tool whose row is disabled is left out. A row whose stored spec
        no longer validates is skipped and logged, not fatal for the run.
        """
        from tools.models import Tool  # here: importing the registry needs no app registry

        specs: list[ToolSpec] = []
        for row in Tool.objects.filter(enabled=True, kind="http").order_by("name"):
            try:
                specs.append(ToolSpec.model_validate(row.spec))
            except ValidationError as exc:
                logger.warning("tool %s has an invalid stored spec, skipped: %s", row.name, exc)
        disabled = Tool.objects.filter(kind="builtin", enabled=False).values_list("name", flat=True)
        chosen = load_providers() if providers is None else list(providers)
        return cls(specs, chosen, exclude=list(disabled))

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return sorted(self._specs)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def describe(self, names: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """MCP-shaped descriptions (name, description, inputSchema, outputs), sorted."""
        chosen = self.names() if names is None else sorted(set(names) & set(self._specs))
        return [self._specs[n].describe() for n in chosen]

    def call(self, name: str, arguments: dict, ctx: ToolCallContext) -> ToolResult:
        """Validate ``arguments`` and call the tool.

        Raises ``ToolNotFound``, ``ToolInputError`` (every schema problem with its
        JSON path), or the tool's own typed errors. A provider raising anything
        that is not a ``FlowpilotError`` is wrapped in ``ToolCallFailed``.
        """
        spec = self._specs.get(name)
        if spec is None:
            raise ToolNotFound(f"no tool named {name!r}")
        validator = self._validators.get(name)
        if validator is None:  # built once per tool and registry (a registry is per run)
            validator = self._validators[name] = schema_validator(spec)
        validate_arguments(spec, arguments, validator=validator)
        if spec.kind == "http":
            # Imported here: http_client needs ToolResult/ToolCallContext from this module.
            from tools.http_client import call_http_tool

            return call_http_tool(spec, dict(arguments), ctx)
        provider = self._providers.get(name)
        if provider is None:
            raise ToolCallFailed(f"tool {name!r} ({spec.kind}) has no provider in this registry")
        return self._call_provider(provider, spec, dict(arguments), ctx)

    @staticmethod
    def _call_provider(
        provider: BuiltinProvider, spec: ToolSpec, arguments: dict, ctx: ToolCallContext
    ) -> ToolResult:
        try:
            output = provider.call_tool(spec.name, arguments, ctx)
        except FlowpilotError:
            raise
        except Exception as exc:
            message = ctx.redactor.scrub_text(f"{type(exc).__name__}: {exc}")
            raise ToolCallFailed(f"tool {spec.name!r} failed: {message}") from exc
        return output if isinstance(output, ToolResult) else ToolResult(output=output)
