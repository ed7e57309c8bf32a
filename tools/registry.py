"""A per-run view of the tools: specs plus how to call them.

Nothing here is module state: a run builds its own :class:`ToolRegistry` (usually
``ToolRegistry.from_db()``) and its own :class:`~tools.calls.ToolCallContext` (env,
redactor, HTTP client), and passes both explicitly, so two runs never share tools,
secrets or clients.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from pydantic import ValidationError

from tools.builtin import BuiltinProvider, load_providers
from tools.calls import ToolCallContext, ToolResult
from tools.errors import (
    FlowpilotError,
    ToolCallFailed,
    ToolConfigError,
    ToolInputError,
    ToolNotFound,
)
from tools.http_client import call_http_tool
from tools.mcp.calls import call_mcp_tool
from tools.models import Tool
from tools.spec import ToolSpec, json_schema_validator

logger = logging.getLogger("flowpilot.tools")


def _json_path(path: Iterable[Any]) -> str:
    text = "$"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def schema_validator(spec: ToolSpec) -> Draft202012Validator:
    return json_schema_validator(spec.input_schema)


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
        """Enabled http and mcp ``Tool`` rows plus the built-in providers.

        ``providers`` defaults to ``settings.FLOWPILOT_BUILTIN_PROVIDERS``. A
        built-in tool whose row is disabled is left out. A row whose stored spec
        no longer validates is skipped and logged, not fatal for the run.
        """
        specs: list[ToolSpec] = []
        for row in Tool.objects.filter(enabled=True, kind__in=["http", "mcp"]).order_by("name"):
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
            return call_http_tool(spec, dict(arguments), ctx)
        if spec.kind == "mcp":
            return call_mcp_tool(spec, dict(arguments), ctx)
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
