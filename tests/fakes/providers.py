"""A test-only built-in provider that misbehaves on purpose (never in the settings).

Tests name it in ``FLOWPILOT_BUILTIN_PROVIDERS`` (``HOSTILE_PROVIDER``), and Celery
workers get it through the same environment variable.

- ``emit``: returns the value named by ``kind`` (``HOSTILE_OUTPUTS``): lists to mutate,
  text with NUL characters, and results that are not JSON (a set, bytes, NaN, an object);
- ``append``: appends ``"mutated"`` to the list it was given (and to a nested one)
  and returns it — a step that changes what it reads;
- ``hold``: returns its ``value`` as given.
"""

from __future__ import annotations

from typing import Any

from tools.builtin.base import BuiltinProvider, BuiltinTool
from tools.calls import ToolCallContext

HOSTILE_PROVIDER = "tests.fakes.providers.HostileProvider"


def deep(depth: int) -> Any:
    value: Any = {"leaf": "\x00end"}
    for _ in range(depth):
        value = {"d": value}
    return value


HOSTILE_OUTPUTS: dict[str, Any] = {
    "list": lambda: {"items": [1, 2], "meta": {"tags": ["a"]}},
    "nul": lambda: {
        "text": "a\x00b",
        "data": {"text": "a\x00b", "key\x00name": ["\x00", "␀0"], "plain": "␀"},
    },
    "deep": lambda: deep(600),
    "set": lambda: {"value": {1, 2}},
    "bytes": lambda: {"value": b"\x00raw"},
    "nan": lambda: {"value": float("nan")},
    "inf": lambda: [float("inf")],
    "object": lambda: {"value": object()},
    "int_key": lambda: {1: "one"},
    "tuple": lambda: {"value": (1, 2)},
    "top_set": lambda: {3},
}


class HostileProvider(BuiltinProvider):
    tools = (
        BuiltinTool(
            name="emit",
            description="Return the hostile value named by kind.",
            input_schema={
                "type": "object",
                "properties": {"kind": {"type": "string", "enum": sorted(HOSTILE_OUTPUTS)}},
                "required": ["kind"],
            },
            handler="emit",
        ),
        BuiltinTool(
            name="append",
            description="Append to the list given (mutates its argument).",
            input_schema={
                "type": "object",
                "properties": {"items": {"type": "array"}, "meta": {"type": "object"}},
                "required": ["items"],
            },
            handler="append",
            outputs=("items",),
        ),
        BuiltinTool(
            name="hold",
            description="Return the value given.",
            input_schema={"type": "object", "properties": {"value": {}}},
            handler="hold",
            outputs=("value",),
        ),
    )

    def emit(self, arguments: dict[str, Any], ctx: ToolCallContext) -> Any:
        return HOSTILE_OUTPUTS[arguments["kind"]]()

    def append(self, arguments: dict[str, Any], ctx: ToolCallContext) -> Any:
        items = arguments["items"]
        items.append("mutated")
        meta = arguments.get("meta")
        if isinstance(meta, dict):
            meta.setdefault("tags", []).append("mutated")
            meta["new"] = True
        return {"items": items}

    def hold(self, arguments: dict[str, Any], ctx: ToolCallContext) -> Any:
        return {"value": arguments.get("value")}
