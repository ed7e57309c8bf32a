"""The typed syntax tree of a condition: small frozen values, each with its source offset.

``pos`` is the 0-based offset of the token that names the node (the operator of a
comparison, the name of a path or function), used for error columns.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal as TypingLiteral

Scalar = None | bool | int | float | str
BoolOpName = TypingLiteral["and", "or"]
CompareOp = TypingLiteral["==", "!=", "<", "<=", ">", ">=", "in", "not in"]
FunctionName = TypingLiteral["len", "exists", "empty"]


@dataclass(frozen=True, slots=True)
class Literal:
    value: Scalar
    pos: int


@dataclass(frozen=True, slots=True)
class ListExpr:
    items: tuple[Node, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Path:
    """``root.seg.0["key"]``: a mapped name followed by keys or list indexes."""

    root: str
    segments: tuple[str, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Call:
    function: FunctionName
    argument: Node
    pos: int


@dataclass(frozen=True, slots=True)
class Not:
    operand: Node
    pos: int


@dataclass(frozen=True, slots=True)
class BoolOp:
    """``a and b and c`` (or ``or``), flattened so long chains stay shallow."""

    op: BoolOpName
    operands: tuple[Node, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Compare:
    op: CompareOp
    left: Node
    right: Node
    pos: int


Node = Literal | ListExpr | Path | Call | Not | BoolOp | Compare
