"""Static checks at compile time: known names, and types wherever literals reveal them.

Each node gets a static type: one of the JSON kinds, or ``ANY`` for values that
come from data (paths). Only certain mistakes are errors — a check never rejects
a condition that could be right for some data.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import NoReturn

from .errors import located
from .nodes import BoolOp, Call, Compare, ListExpr, Literal, Node, Not, Path
from .values import a as _a
from .values import kind_of

ANY = "any"
_ORDERABLE = frozenset({"number", "string", ANY})
_SIZED = frozenset({"string", "list", ANY})  # objects only come from data, so as ANY
_CONTAINERS = frozenset({"string", "list", ANY})


class Checker:
    """Walks a tree once; collects root names in source order; raises the first problem."""

    def __init__(self, source: str, allowed: Collection[str] | None) -> None:
        self.source = source
        self.allowed = _ordered(allowed) if allowed is not None else None
        self.roots: list[str] = []

    def check_condition(self, node: Node) -> None:
        self.require_condition(node, self.check(node))

    def check(self, node: Node) -> str:
        match node:
            case Literal(value=value):
                return kind_of(value)
            case ListExpr(items=items):
                for item in items:
                    self.check(item)
                return "list"
            case Path():
                self.check_name(node)
                return ANY
            case Not(operand=operand):
                self.require_condition(operand, self.check(operand))
                return "boolean"
            case BoolOp(operands=operands):
                for operand in operands:
                    self.require_condition(operand, self.check(operand))
                return "boolean"
            case Call():
                return self.check_call(node)
            case Compare():
                self.check_compare(node, self.check(node.left), self.check(node.right))
                return "boolean"
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    def fail(self, reason: str, node: Node, hint: str = "") -> NoReturn:
        raise located(reason, source=self.source, pos=node.pos, hint=hint)

    def require_condition(self, node: Node, kind: str) -> None:
        """A literal other than true/false where a condition belongs is always a mistake."""
        if isinstance(node, Literal | ListExpr) and kind != "boolean":
            self.fail(f"{_a(kind)} literal is not a condition", node, "compare it with something")

    def check_name(self, path: Path) -> None:
        if path.root not in self.roots:
            self.roots.append(path.root)
        if self.allowed is None or path.root in self.allowed:
            return
        mapped = ", ".join(self.allowed) if self.allowed else "nothing"
        self.fail(f"unknown name `{path.root}` (mapped: {mapped})", path, self.suggest(path.root))

    def suggest(self, name: str) -> str:
        if name.lower() in ("true", "false", "null") or name == "None":
            return f"write `{'null' if name == 'None' else name.lower()}`"
        close = difflib.get_close_matches(name, self.allowed or (), n=1)
        return f"did you mean `{close[0]}`?" if close else ""

    def check_call(self, call: Call) -> str:
        kind = self.check(call.argument)
        if call.function == "exists":
            if not isinstance(call.argument, Path):
                self.fail("`exists()` expects a path like `geo.error`", call.argument)
            return "boolean"
        if kind not in _SIZED:
            self.fail(f"`{call.function}()` expects a string, list or object, not {_a(kind)}", call)
        return "number" if call.function == "len" else "boolean"

    def check_compare(self, node: Compare, left: str, right: str) -> None:
        op = node.op
        if op in ("==", "!="):
            if ANY not in (left, right) and "null" not in (left, right) and left != right:
                always = "true" if op == "!=" else "false"
                self.fail(f"`{op}` between {_a(left)} and {_a(right)} is always {always}", node)
        elif op in ("in", "not in"):
            if right not in _CONTAINERS:
                self.fail(
                    f"`{op}` needs a list, string or object on its right, not {_a(right)}", node
                )
            if right == "string" and left not in ("string", ANY):
                self.fail(
                    f"`{op}` on a string tests for a substring; needs a string, not {_a(left)}",
                    node,
                )
        else:
            for kind in (left, right):
                if kind not in _ORDERABLE:
                    hint = "use `== null` to test for null" if kind == "null" else ""
                    self.fail(f"`{op}` cannot order {_a(kind)}", node, hint)
            if ANY not in (left, right) and left != right:
                self.fail(f"`{op}` cannot compare {_a(left)} with {_a(right)}", node)


def _ordered(names: Collection[str]) -> tuple[str, ...]:
    """Mapping order is kept for messages; plain sets are sorted so messages are stable."""
    return tuple(sorted(names)) if isinstance(names, set | frozenset) else tuple(names)
