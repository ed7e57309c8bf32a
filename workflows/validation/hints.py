"""The fix for a condition or JMESPath expression that does not compile.

The parsers say where they stopped; a planner also needs to know what to write
instead. Each function returns a short advice (``""`` when nothing specific
applies) that the kind checks append to the parser's message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_OPEN_FOR = {"}": "{", "]": "[", ")": "("}
_ARITHMETIC = re.compile(r"[A-Za-z0-9_`\])]\s*[-+*/%]\s*[A-Za-z0-9_`(\[]")
_JSON_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
_TYPE_WORDS = {"list": "array", "dict": "object", "str": "string", "int": "integer",
               "float": "number", "bool": "boolean", "none": "null"}  # fmt: skip


def condition_fix(text: str, mapping: Mapping[str, Any]) -> str:
    """Advice for a decision condition that does not compile."""
    if "{{" in text or "}}" in text:
        plain = re.sub(r"\{\{\s*([^{}]*?)\s*\}\}", r"\1", text).replace("{{", "").replace("}}", "")
        return (
            "a condition is an expression over the step's mapped names, not a template: "
            f"write `{plain}` (no `{{{{ }}}}`)"
        )
    dollar = re.search(r"\$[A-Za-z_][\w.]*", text)
    if dollar:
        mapped = [name for name, value in mapping.items() if value == dollar.group(0)]
        if mapped:
            return f"a condition reads only mapped names: write `{mapped[0]}` for `{dollar[0]}`"
        return (
            f"a condition reads only the step's mapped names: map `{dollar.group(0)}` in its "
            "`input_mapping` (e.g. `limit: ...`) and compare with that name"
        )
    if re.search(r"\b(True|False|None)\b", text) or re.search(r"\bif\b.*\belse\b", text):
        return (
            "a condition is one boolean expression over mapped names, such as `count > 0`; "
            "constants are lowercase `true`, `false`, `null`"
        )
    if _ARITHMETIC.search(text):
        return "compute the value in a `transform` step upstream and map its result"
    return ""


def transform_fix(expression: str) -> str:
    """Advice for a JMESPath expression that does not compile."""
    if re.match(r"\s*f['\"]", expression) or re.search(r"\{[a-z_]+\}", expression):
        return (
            "JMESPath has no string interpolation; build text with "
            "`join('', [`\"text \"`, name])` or in an llm step"
        )
    unclosed = _unclosed(expression)
    if unclosed:
        return f"close what is open: add {', '.join(f'`{c}`' for c in unclosed)}"
    if _ARITHMETIC.search(re.sub(r"'[^']*'|`[^`]*`", "x", expression)):
        return (
            "JMESPath has no arithmetic (`+ - * /`); use `sum()`, `max()`, `length()`, or "
            "compute the value in a tool step"
        )
    return ""


# The advice for a JMESPath syntax error no rule above recognises.
JMESPATH_SYNTAX = (
    "write it in JMESPath: fields by name (`lat`, `geo.name`), literals in backticks "
    "(`` `3` ``), text in single quotes (`'high'`), functions such as `sum([a, b])`, "
    "`length(rows)`, `join(', ', names)`"
)


def schema_type_fix(message: str) -> str:
    """Advice for an ``output_schema`` with a Python type name (``list``) as its type."""
    for word, json_type in _TYPE_WORDS.items():
        if f"'{word}'" in message.lower():
            return f"; JSON Schema calls `{word}` `{json_type}` (types: {', '.join(_JSON_TYPES)})"
    return ""


def _unclosed(text: str) -> list[str]:
    """The closing brackets a cut-off expression lacks, innermost first."""
    stack: list[str] = []
    quote = ""
    for char in text:
        if quote:
            quote = "" if char == quote else quote
        elif char in "'\"`":
            quote = char
        elif char in "{[(":
            stack.append(char)
        elif char in "}])" and stack and stack[-1] == _OPEN_FOR[char]:
            stack.pop()
    closers = {v: k for k, v in _OPEN_FOR.items()}
    return [closers[c] for c in reversed(stack)]
