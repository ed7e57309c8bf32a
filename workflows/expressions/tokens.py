"""Tokenizer: condition text → a list of tokens ending with ``END``.

A key after ``.`` is read as one ``SEGMENT`` (``items.0.name``, ``a.b-c``,
``items.-1``), so numbers and dashes inside paths never look like literals.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from .errors import located
from .nodes import Scalar


class T(StrEnum):
    NUMBER = "number"
    STRING = "string"
    NAME = "name"
    SEGMENT = "segment"
    KEYWORD = "keyword"
    OP = "operator"
    DOT = "."
    COMMA = ","
    MINUS = "-"
    LPAREN = "("
    RPAREN = ")"
    LBRACKET = "["
    RBRACKET = "]"
    END = "end"


KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})
_PUNCTUATION = {
    ".": T.DOT,
    ",": T.COMMA,
    "-": T.MINUS,
    "(": T.LPAREN,
    ")": T.RPAREN,
    "[": T.LBRACKET,
    "]": T.RBRACKET,
}
_OPERATORS = ("==", "!=", "<=", ">=", "<", ">")  # longest first
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.]")
_NUMBER_BLOB = re.compile(r"[A-Za-z0-9_.]+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SEGMENT = re.compile(r"[A-Za-z0-9_-]+")
_SPACE = re.compile(r"[ \t\r\n]+")
_ESCAPES = {'"': '"', "'": "'", "\\": "\\", "/": "/", "n": "\n", "t": "\t", "r": "\r"}
HINTS = {
    "=": "use `==` to compare",
    "&": "use `and`",
    "|": "use `or`",
    "!": "use `not` or `!=`",
    "-": "arithmetic is not supported",
    "+": "arithmetic is not supported",
    "*": "arithmetic is not supported",
    "/": "arithmetic is not supported",
    "%": "arithmetic is not supported",
}


@dataclass(frozen=True, slots=True)
class Token:
    kind: T
    text: str
    pos: int
    value: Scalar = None

    def describe(self) -> str:
        if self.kind is T.END:
            return "end of expression"
        text = self.text if len(self.text) <= 30 else self.text[:29] + "…"
        return f"`{text}`"


def tokenize(source: str) -> list[Token]:
    """Split ``source`` into tokens; raises ``ExpressionError`` at the first bad character."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(source):
        space = _SPACE.match(source, pos)
        if space:
            pos = space.end()
            continue
        token = _next_token(source, pos)
        tokens.append(token)
        pos = token.pos + len(token.text)
        if token.kind is T.DOT:
            segment = _SEGMENT.match(source, pos)
            if not segment:
                raise located("expected a key or index right after `.`", source=source, pos=pos)
            tokens.append(Token(T.SEGMENT, segment.group(), pos, segment.group()))
            pos = segment.end()
    tokens.append(Token(T.END, "", len(source)))
    return tokens


def _next_token(source: str, pos: int) -> Token:
    char = source[pos]
    if char in "\"'":
        return _string(source, pos)
    if char.isascii() and char.isdigit():
        return _number(source, pos)
    name = _NAME.match(source, pos)
    if name:
        word = name.group()
        return Token(T.KEYWORD if word in KEYWORDS else T.NAME, word, pos)
    for op in _OPERATORS:
        if source.startswith(op, pos):
            return Token(T.OP, op, pos)
    if char in _PUNCTUATION:
        return Token(_PUNCTUATION[char], char, pos)
    hint = HINTS.get(char, "")
    raise located(f"unexpected character `{char}`", source=source, pos=pos, hint=hint)


def _number(source: str, pos: int) -> Token:
    match = _NUMBER.match(source, pos)
    assert match is not None  # the caller saw a digit
    text = match.group()
    if _NUMBER_TAIL.match(source, match.end()):
        blob = _NUMBER_BLOB.match(source, pos)
        assert blob is not None
        raise located(f"malformed number `{blob.group()}`", source=source, pos=pos)
    value: int | float = float(text) if any(c in text for c in ".eE") else int(text)
    return Token(T.NUMBER, text, pos, value)


def _string(source: str, pos: int) -> Token:
    quote = source[pos]
    chars: list[str] = []
    i = pos + 1
    while i < len(source):
        char = source[i]
        if char == quote:
            return Token(T.STRING, source[pos : i + 1], pos, "".join(chars))
        if char != "\\":
            chars.append(char)
            i += 1
            continue
        escaped, i = _escape(source, i)
        chars.append(escaped)
    raise located("unterminated string", source=source, pos=pos)


def _escape(source: str, i: int) -> tuple[str, int]:
    """The character of the escape starting at ``source[i] == "\\"`` and the offset after it."""
    code = source[i + 1 : i + 2]
    if code in _ESCAPES:
        return _ESCAPES[code], i + 2
    digits = source[i + 2 : i + 6]
    if code == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", digits):
        return chr(int(digits, 16)), i + 6
    shown = source[i : i + 6] if code == "u" else source[i : i + 2]
    raise located(
        f"unknown escape `{shown}`",
        source=source,
        pos=i,
        hint="use \\\" \\' \\\\ \\n \\t \\r \\/ or \\uXXXX",
    )
