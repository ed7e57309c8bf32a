"""Pratt parser: tokens → a ``nodes`` tree.

Binding powers, loosest first: ``or`` 10, ``and`` 20, prefix ``not`` 30, the
comparisons ``== != < <= > >= in not in`` 40. Comparisons do not chain
(``a < b < c`` is an error: Python and JavaScript read it differently, so no
reading is safe). Every nested sub-expression counts one level towards
``MAX_DEPTH``, so hostile nesting fails with ``ExpressionError`` long before
Python's own recursion limit.
"""

from __future__ import annotations

from typing import NoReturn, cast, get_args

from .errors import located
from .nodes import (
    BoolOp,
    BoolOpName,
    Call,
    Compare,
    CompareOp,
    FunctionName,
    ListExpr,
    Literal,
    Node,
    Not,
    Path,
)
from .tokens import HINTS, T, Token, tokenize

MAX_DEPTH = 50
FUNCTIONS: tuple[str, ...] = get_args(FunctionName)
_OR, _AND, _NOT, _COMPARE = 10, 20, 30, 40
_LITERAL_KEYWORDS = {"true": True, "false": False, "null": None}


def parse(source: str) -> Node:
    return _Parser(source).parse()


def is_reserved(name: str) -> bool:
    """``__x__`` names are Python's special names; refusing them keeps intent obvious."""
    return len(name) >= 4 and name.startswith("__") and name.endswith("__")


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source
        self.tokens = tokenize(source)
        self.index = 0
        self.depth = 0

    def parse(self) -> Node:
        node = self.expression(0)
        if self.peek().kind is not T.END:
            self.unexpected(self.peek())
        return node

    def expression(self, rbp: int) -> Node:
        self.depth += 1
        try:
            if self.depth > MAX_DEPTH + 1:  # the whole condition is level 0
                self.fail(f"expression nests deeper than {MAX_DEPTH} levels", self.peek())
            left = self.nud(self.advance())
            while rbp < self.lbp():
                left = self.led(self.advance(), left)
            return left
        finally:
            self.depth -= 1

    # -- tokens ------------------------------------------------------------------------------

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.peek()
        self.index = min(self.index + 1, len(self.tokens) - 1)
        return token

    def expect(self, kind: T, *, closing: Token | None = None) -> Token:
        token = self.advance()
        if token.kind is not kind:
            opened = ""
            if closing:
                opened = f" to close the `{closing.text}` at column {closing.pos + 1}"
            self.fail(f"expected `{kind.value}`{opened}, found {token.describe()}", token)
        return token

    def fail(self, reason: str, token: Token, hint: str = "") -> NoReturn:
        raise located(reason, source=self.source, pos=token.pos, hint=hint)

    def unexpected(self, token: Token) -> NoReturn:
        self.fail(f"unexpected {token.describe()}", token, HINTS.get(token.text, ""))

    # -- infix -------------------------------------------------------------------------------

    def lbp(self) -> int:
        token = self.peek()
        if token.kind is T.OP or (token.kind is T.KEYWORD and token.text == "in"):
            return _COMPARE
        if token.kind is T.KEYWORD:
            if token.text == "not" and self.peek(1).text == "in" and self.peek(1).kind is T.KEYWORD:
                return _COMPARE
            return {"or": _OR, "and": _AND}.get(token.text, 0)
        return 0

    def led(self, token: Token, left: Node) -> Node:
        if token.text in ("and", "or"):
            op = cast(BoolOpName, token.text)
            right = self.expression(_AND if op == "and" else _OR)
            if isinstance(left, BoolOp) and left.op == op:
                return BoolOp(op, (*left.operands, right), left.pos)
            return BoolOp(op, (left, right), token.pos)
        op_text = token.text
        if op_text == "not":
            self.advance()  # the `in` that lbp() saw
            op_text = "not in"
        right = self.expression(_COMPARE)
        if self.lbp() == _COMPARE:
            self.fail(
                f"comparisons cannot be chained: {self.peek().describe()} follows `{op_text}`",
                self.peek(),
                "join them with `and`",
            )
        return Compare(cast(CompareOp, op_text), left, right, token.pos)

    # -- prefix ------------------------------------------------------------------------------

    def nud(self, token: Token) -> Node:
        match token.kind:
            case T.NUMBER | T.STRING:
                return Literal(token.value, token.pos)
            case T.MINUS:
                number = self.advance()
                if number.kind is not T.NUMBER:
                    self.fail("`-` must be followed by a number", token, HINTS["-"])
                return Literal(-cast(float, number.value), token.pos)
            case T.KEYWORD if token.text in _LITERAL_KEYWORDS:
                return Literal(_LITERAL_KEYWORDS[token.text], token.pos)
            case T.KEYWORD if token.text == "not":
                return Not(self.expression(_NOT), token.pos)
            case T.NAME if self.peek().kind is T.LPAREN:
                return self.call(token)
            case T.NAME:
                return self.path(token)
            case T.LPAREN:
                inner = self.expression(0)
                self.expect(T.RPAREN, closing=token)
                return inner
            case T.LBRACKET:
                return self.list_literal(token)
        self.unexpected(token)

    def call(self, name: Token) -> Call:
        if name.text not in FUNCTIONS:
            available = ", ".join(sorted(FUNCTIONS))
            self.fail(f"unknown function `{name.text}`", name, f"available: {available}")
        opener = self.advance()
        arguments: list[Node] = []
        while self.peek().kind is not T.RPAREN:
            arguments.append(self.expression(0))
            if self.peek().kind is not T.COMMA:
                break
            self.advance()
        self.expect(T.RPAREN, closing=opener)
        if len(arguments) != 1:
            self.fail(f"`{name.text}()` takes exactly one argument ({len(arguments)} given)", name)
        return Call(cast(FunctionName, name.text), arguments[0], name.pos)

    def path(self, root: Token) -> Path:
        self.check_reserved(root)
        segments: list[str] = []
        while self.peek().kind in (T.DOT, T.LBRACKET):
            if self.advance().kind is T.DOT:
                segment = self.advance()  # the tokenizer guarantees a SEGMENT here
                self.check_reserved(segment)
                segments.append(segment.text)
            else:
                segments.append(self.subscript())
        return Path(root.text, tuple(segments), root.pos)

    def subscript(self) -> str:
        """The key of ``["key"]`` or ``[0]`` / ``[-1]``; the ``[`` is already consumed."""
        token = self.advance()
        if token.kind is T.MINUS and self.peek().kind is T.NUMBER:
            token = self.advance()
            key = f"-{token.text}"
        elif token.kind in (T.STRING, T.NUMBER):
            key = str(token.value) if token.kind is T.STRING else token.text
        else:
            self.fail(f"expected a quoted key or an integer index, found {token.describe()}", token)
        if token.kind is T.NUMBER and not isinstance(token.value, int):
            self.fail(f"a list index must be an integer, found {token.describe()}", token)
        if token.kind is T.STRING:
            self.check_reserved(token, key)
        self.expect(T.RBRACKET)
        return key

    def check_reserved(self, token: Token, name: str | None = None) -> None:
        name = token.text if name is None else name
        if is_reserved(name):
            self.fail(f"`{name}` is not allowed", token, "names of the form `__x__` are reserved")

    def list_literal(self, opener: Token) -> ListExpr:
        items: list[Node] = []
        while self.peek().kind is not T.RBRACKET:
            items.append(self.expression(0))
            if self.peek().kind is not T.COMMA:
                break
            self.advance()
        self.expect(T.RBRACKET, closing=opener)
        return ListExpr(tuple(items), opener.pos)
