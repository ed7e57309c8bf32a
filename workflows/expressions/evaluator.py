"""Evaluation of a checked tree over mapped values.

Null semantics: a missing path is null; functions of null are null (``len``) or
answer the question (``exists`` false, ``empty`` true); ordering with null is
false; ``==`` across kinds is false; membership in null is false. Only type
misuse the compiler could not see (``len(x)`` where ``x`` is a number in the
data) raises ``ExpressionError``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NoReturn

from .errors import located
from .nodes import BoolOp, Call, Compare, ListExpr, Literal, Node, Not, Path
from .values import a, equal, kind_of, resolve, show

_ORDER = {
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


class Evaluator:
    def __init__(self, source: str, values: Mapping[str, Any]) -> None:
        self.source = source
        self.values = values

    def condition(self, node: Node) -> bool:
        return self.truthy(node, self.value(node))

    def value(self, node: Node) -> Any:
        match node:
            case Literal(value=value):
                return value
            case ListExpr(items=items):
                return [self.value(item) for item in items]
            case Path(root=root, segments=segments):
                return resolve(self.values, root, segments)
            case Not(operand=operand):
                return not self.condition(operand)
            case BoolOp(op="and", operands=operands):
                return all(self.condition(operand) for operand in operands)
            case BoolOp(op="or", operands=operands):
                return any(self.condition(operand) for operand in operands)
            case Call():
                return self.call(node, self.value(node.argument))
            case Compare():
                return self.compare(node, self.value(node.left), self.value(node.right))
        raise AssertionError(f"unknown node {node!r}")  # pragma: no cover

    def fail(self, reason: str, node: Node) -> NoReturn:
        raise located(reason, source=self.source, pos=node.pos)

    def truthy(self, node: Node, value: Any) -> bool:
        if kind_of(value) == "unsupported":
            self.fail(f"a value of type `{type(value).__name__}` is not JSON data", node)
        return bool(value)

    def call(self, call: Call, argument: Any) -> Any:
        if call.function == "exists":
            return argument is not None
        if argument is None:
            return None if call.function == "len" else True
        kind = kind_of(argument)
        if kind not in ("string", "list", "object"):
            self.fail(
                f"`{call.function}()` expects a string, list or object, "
                f"but got the {kind} {show(argument)}",
                call,
            )
        return len(argument) if call.function == "len" else not argument

    def compare(self, node: Compare, left: Any, right: Any) -> bool:
        if node.op == "==":
            return equal(left, right)
        if node.op == "!=":
            return not equal(left, right)
        if node.op == "in":
            return self.contains(node, right, left)
        if node.op == "not in":
            return not self.contains(node, right, left)
        if left is None or right is None:
            return False
        kinds = kind_of(left), kind_of(right)
        if kinds[0] != kinds[1] or kinds[0] not in ("number", "string"):
            self.fail(
                f"`{node.op}` cannot compare the {kinds[0]} {show(left)} "
                f"with the {kinds[1]} {show(right)}",
                node,
            )
        return bool(_ORDER[node.op](left, right))

    def contains(self, node: Compare, container: Any, item: Any) -> bool:
        kind = kind_of(container)
        if kind == "null":
            return False
        if kind == "list":
            return any(equal(item, element) for element in container)
        if kind in ("string", "object"):
            if item is None:
                return False
            if isinstance(item, str):
                return item in container
            what = "a substring" if kind == "string" else "a key"
            self.fail(
                f"`{node.op}` on {a(kind)} tests for {what}, so needs a string, "
                f"but got the {kind_of(item)} {show(item)}",
                node,
            )
        self.fail(
            f"`{node.op}` needs a list, string or object on its right, "
            f"but got the {kind} {show(container)}",
            node,
        )
