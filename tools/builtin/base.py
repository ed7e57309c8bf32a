"""The built-in provider contract (the MCP shape, in process).

``list_tools()`` describes the tools (``name``, ``description``, ``inputSchema``,
``outputs``, optional ``outputSchema`` (an object schema whose properties type the
outputs, as MCP lists it) and ``annotations.idempotentHint``); ``call_tool()`` runs one
and returns its result, or raises ``ToolCallFailed`` / ``ToolInputError``.
Arguments arrive already validated against ``inputSchema`` by the registry.

Subclasses usually declare a ``tools`` table of :class:`BuiltinTool` whose
``handler`` names a method ``(arguments, ctx) -> result``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from tools.calls import ToolCallContext
from tools.errors import ToolNotFound
from tools.output_types import MAX_OUTPUT_TYPES_BYTES, fields_of
from tools.spec import ToolSpec


@dataclass(frozen=True)
class BuiltinTool:
    """One declared built-in tool. ``handler`` is the provider method that runs it."""

    name: str
    description: str
    input_schema: dict[str, Any]
    handler: str
    outputs: tuple[str, ...] = ()
    output_types: dict[str, dict[str, Any]] | None = None  # output field -> JSON Schema
    idempotent: bool = True
    deprecated: bool = False  # not offered to the planner; the validator warns on each use
    replacement: str | None = None  # a deprecated tool's successor


class BuiltinProvider:
    """Base class of in-process tool providers. Instances hold no run state."""

    tools: ClassVar[tuple[BuiltinTool, ...]] = ()

    def list_tools(self) -> list[dict[str, Any]]:
        return [
            {
                "name": tool.name,
                "description": tool.description,
                "inputSchema": tool.input_schema,
                "outputs": list(tool.outputs),
                **(
                    {"outputSchema": {"type": "object", "properties": dict(tool.output_types)}}
                    if tool.output_types
                    else {}
                ),
                "annotations": {"idempotentHint": tool.idempotent},
                **(
                    {"deprecated": True, "replacement": tool.replacement} if tool.deprecated else {}
                ),
            }
            for tool in self.tools
        ]

    def call_tool(self, name: str, arguments: dict[str, Any], ctx: ToolCallContext) -> Any:
        for tool in self.tools:
            if tool.name == name:
                return getattr(self, tool.handler)(arguments, ctx)
        raise ToolNotFound(f"{type(self).__name__} has no tool named {name!r}")

    def specs(self) -> list[ToolSpec]:
        """``list_tools()`` as ``ToolSpec(kind="builtin")`` values."""
        return [
            ToolSpec(
                name=item["name"],
                kind="builtin",
                description=item.get("description", ""),
                input_schema=item.get("inputSchema") or {"type": "object", "properties": {}},
                outputs=list(item.get("outputs", [])),
                output_types=fields_of(item.get("outputSchema"), MAX_OUTPUT_TYPES_BYTES) or None,
                idempotent=bool(item.get("annotations", {}).get("idempotentHint", True)),
                deprecated=bool(item.get("deprecated", False)),
                replacement=item.get("replacement"),
            )
            for item in self.list_tools()
        ]
