"""``transform`` steps: pure reshaping of the mapped values with JMESPath.

``compile_transform`` parses once, at validation time, and also checks what
JMESPath itself leaves to run time: that every function exists and gets a
valid number of arguments. ``CompiledTransform.apply`` searches the mapped
values; every failure — a JMESPath type error, or the ``TypeError`` the
``jmespath`` library lets through when ``<`` meets a string and a number — is a
``TransformError``. JMESPath has no side effects and no access to Python
objects beyond dict and list lookups, so an expression can only reshape data.

Limits against hostile input: ``MAX_LENGTH`` characters and ``MAX_DEPTH``
levels of brackets, checked before ``jmespath`` (a recursive parser) sees the
text. Evaluation is bounded in size and time (``apply(max_bytes=…, seconds=…)``):
the search runs in a ``TreeInterpreter`` that measures every value an operation
*builds* (a function's result, a projection, a flatten, a multi-select) as soon as it
is built, and refuses one over the cap with ``OutputTooLarge``. Its operands are
either parts of the input (within the cap: the step's arguments are measured first)
or built values already measured, and no JMESPath operation builds more than a small
multiple of its operands (``join`` and ``to_string`` at most their size, a
multi-select references its parts), so a transform meant to amplify its input fails
at the first operation past the cap, never after building the whole thing. Values
are measured by reference (``tools.sizes``: shared parts once), so the checks cost
O(values built). The clock is read at every node: past ``seconds`` the search stops
with a ``transform_invalid`` error.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import jmespath
from jmespath import exceptions as jmespath_errors
from jmespath.functions import Functions
from jmespath.parser import ParsedResult
from jmespath.visitor import TreeInterpreter

from tools.errors import FlowpilotError
from tools.sizes import Memo, OutputTooLarge, json_bytes
from workflows.expressions.errors import excerpt

MAX_LENGTH = 4000
MAX_DEPTH = 50
DEFAULT_SECONDS = 10.0  # a transform step without its own timeout
# Operations that build a new value (the others only read a part of their operand).
_BUILDERS = frozenset(
    {
        "function_expression",
        "multi_select_dict",
        "multi_select_list",
        "projection",
        "value_projection",
        "filter_projection",
        "flatten",
        "slice",
    }
)
_OPENERS, _CLOSERS, _QUOTES = "([{", ")]}", "'\"`"
_TOKEN_NAMES = {
    "quoted_identifier": "a quoted name",
    "unquoted_identifier": "a name",
    "number": "a number",
    "lbracket": "`[`",
    "rbracket": "`]`",
    "lbrace": "`{`",
    "rbrace": "`}`",
    "lparen": "`(`",
    "rparen": "`)`",
    "colon": "`:`",
    "comma": "`,`",
    "dot": "`.`",
}


class TransformError(FlowpilotError):
    """A JMESPath expression that does not parse, or fails on the data it is given."""

    code = "transform_invalid"

    def __init__(self, message: str, *, source: str = "", column: int | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.column = column


@dataclass(frozen=True)
class CompiledTransform:
    """A parsed, checked JMESPath expression."""

    source: str
    parsed: ParsedResult = field(repr=False, compare=False)

    def apply(
        self,
        values: Mapping[str, Any],
        *,
        max_bytes: int | None = None,
        seconds: float = DEFAULT_SECONDS,
    ) -> Any:
        """The expression's result over the mapped values; ``TransformError`` on failure,
        ``OutputTooLarge`` (naming no step) when it would build more than ``max_bytes``."""
        data = dict(values) if isinstance(values, Mapping) else values
        interpreter = _BoundedInterpreter(self.source, max_bytes, seconds)
        try:
            return interpreter.visit(self.parsed.parsed, data)
        except (jmespath_errors.JMESPathError, TypeError, ValueError) as exc:
            raise TransformError(
                f"transform `{_shown(self.source)}` failed: {_runtime_reason(exc)}",
                source=self.source,
            ) from exc
        except RecursionError:
            raise TransformError(
                f"transform `{_shown(self.source)}` failed: data nested too deeply",
                source=self.source,
            ) from None


class _BoundedInterpreter(TreeInterpreter):
    """JMESPath's interpreter measuring what each operation builds, under a deadline."""

    def __init__(self, source: str, max_bytes: int | None, seconds: float) -> None:
        super().__init__()
        self._source = source
        self._max_bytes = max_bytes
        self._seconds = seconds
        self._deadline = time.monotonic() + seconds
        self._memo: Memo = {}

    def visit(self, node: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        if time.monotonic() > self._deadline:
            raise TransformError(
                f"transform `{_shown(self._source)}` took longer than {self._seconds:g} s",
                source=self._source,
            )
        result = super().visit(node, *args, **kwargs)
        if self._max_bytes is not None and node["type"] in _BUILDERS:
            size = json_bytes(result, self._memo)
            if size > self._max_bytes:
                raise OutputTooLarge(
                    step="", what="transform result", size=size, cap=self._max_bytes
                )
        return result


def compile_transform(expression: str) -> CompiledTransform:
    """Parse and check a JMESPath expression; ``TransformError`` names it and the column."""
    if not isinstance(expression, str):
        raise TransformError(f"a transform must be a string, not {type(expression).__name__}")
    if not expression.strip():
        raise TransformError("transform expression is empty", source=expression)
    if len(expression) > MAX_LENGTH:
        raise TransformError(
            f"transform is {len(expression)} characters long, more than the {MAX_LENGTH} "
            f"allowed: `{_shown(expression)}`",
            source=expression,
        )
    _check_depth(expression)
    try:
        parsed = jmespath.compile(expression)
    except jmespath_errors.ParseError as exc:
        raise _syntax_error(expression, exc) from exc
    except RecursionError:  # pragma: no cover - _check_depth stops this first
        raise TransformError(
            f"transform `{_shown(expression)}` nests too deeply", source=expression
        ) from None
    _check_functions(expression, parsed.parsed)
    return CompiledTransform(source=expression, parsed=parsed)


def _syntax_error(source: str, exc: jmespath_errors.ParseError) -> TransformError:
    if isinstance(exc, jmespath_errors.LexerError):
        reason, position = _lowered(exc.message), exc.lexer_position
    elif isinstance(exc, jmespath_errors.IncompleteExpressionError):
        reason, position = "incomplete expression", len(source)
    else:
        reason, position = _parse_reason(exc), exc.lex_position
    return _located(f"invalid JMESPath: {reason}", source, position)


def _parse_reason(exc: jmespath_errors.ParseError) -> str:
    at_end = exc.token_type == "EOF"  # noqa: S105 - a token kind, not a password
    found = "end of expression" if at_end else f"`{exc.token_value}`"
    expecting = re.fullmatch(r"Expecting: (.*), got: \w+", exc.msg)
    if expecting:
        wanted = [_TOKEN_NAMES.get(kind, kind) for kind in re.findall(r"\w+", expecting[1])]
        listed = ", ".join(wanted[:-1]) + " or " + wanted[-1] if len(wanted) > 1 else wanted[0]
        return f"expected {listed}, found {found}"
    if exc.msg == "invalid token" or exc.msg.startswith("Unexpected token"):
        return f"unexpected {found}"
    return f"{_lowered(exc.msg).rstrip('.')} (found {found})"


def _lowered(message: str) -> str:
    return message[:1].lower() + message[1:]


def _located(reason: str, source: str, position: int, *, hint: str = "") -> TransformError:
    message = f"{reason} at column {position + 1} in `{excerpt(source, position)}`"
    return TransformError(
        f"{message}; {hint}" if hint else message, source=source, column=position + 1
    )


def _check_depth(source: str) -> None:
    """Refuse more than ``MAX_DEPTH`` open brackets, outside quoted text and literals."""
    depth, quote, escaped = 0, "", False
    for position, char in enumerate(source):
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in _QUOTES:
            quote = char
        elif char in _OPENERS:
            depth += 1
            if depth > MAX_DEPTH:
                raise _located(f"expression nests deeper than {MAX_DEPTH} levels", source, position)
        elif char in _CLOSERS:
            depth = max(0, depth - 1)


def _check_functions(source: str, node: Any) -> None:
    """Unknown functions and wrong argument counts, which ``jmespath`` reports only at run time."""
    for name, arguments in _function_calls(node):
        spec = Functions.FUNCTION_TABLE.get(name)
        position = _find_call(source, name)
        if spec is None:
            available = ", ".join(sorted(Functions.FUNCTION_TABLE))
            raise _located(
                f"unknown function `{name}()`", source, position, hint=f"available: {available}"
            )
        signature = spec["signature"]
        variadic = bool(signature) and signature[-1].get("variadic", False)
        if arguments < len(signature) or (arguments > len(signature) and not variadic):
            expected = f"at least {len(signature)}" if variadic else str(len(signature))
            plural = "s" if len(signature) != 1 else ""
            raise _located(
                f"`{name}()` takes {expected} argument{plural}, {arguments} given",
                source,
                position,
            )


def _function_calls(node: Any) -> Iterator[tuple[str, int]]:
    """(name, argument count) of every function call in a parsed tree, depth first."""
    if not isinstance(node, dict):
        return
    if node.get("type") == "function_expression":
        yield node["value"], len(node["children"])
    for child in node.get("children", ()):
        yield from _function_calls(child)


def _find_call(source: str, name: str) -> int:
    match = re.search(rf"(?<![\w$]){re.escape(name)}\s*\(", source)
    return match.start() if match else 0


def _runtime_reason(exc: Exception) -> str:
    if isinstance(exc, jmespath_errors.JMESPathTypeError):
        return (
            f"`{exc.function_name}()` expects {' or '.join(exc.expected_types)}, "
            f"got {exc.actual_type} {_shown(repr(exc.current_value), 40)}"
        )
    if isinstance(exc, TypeError):
        return f"values cannot be compared ({exc})"
    return str(exc)


def _shown(text: str, limit: int = 120) -> str:
    flat = text.replace("\n", " ")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def multiselect_keys(expression: str) -> tuple[str, ...] | None:
    """The keys of a JMESPath expression that is one ``{key: expr, …}`` hash, else None."""
    try:
        node = jmespath.compile(expression).parsed
    except (jmespath_errors.JMESPathError, RecursionError, TypeError, ValueError):
        return None
    if node.get("type") != "multi_select_dict":
        return None
    return tuple(child["value"] for child in node["children"])


# What a JMESPath function returns, when that is one JSON type whatever it is given
# (``max``, ``min``, ``not_null``… depend on their arguments: unknown).
_RETURNS: dict[str, Any] = {
    "length": "integer",
    "to_string": "string",
    "join": "string",
    "type": "string",
    "to_number": ["number", "null"],
    "sum": "number",
    "avg": ["number", "null"],
    "abs": "number",
    "ceil": "number",
    "floor": "number",
    "keys": "array",
    "values": "array",
    "sort": "array",
    "sort_by": "array",
    "to_array": "array",
    "map": "array",
    "merge": "object",
    "contains": "boolean",
    "starts_with": "boolean",
    "ends_with": "boolean",
    "reverse": ["array", "string"],
}
_LISTS = frozenset({"projection", "value_projection", "filter_projection", "flatten", "slice"})


def output_field_schemas(expression: str) -> dict[str, dict[str, Any]] | None:
    """The JSON Schema of each key of a top-level ``{key: expr, …}`` expression, inferred
    from the expression alone (``{}`` for a key whose type depends on the data: a field
    read, a pipe, ``max``…); None when the expression is not such a hash."""
    try:
        node = jmespath.compile(expression).parsed
    except (jmespath_errors.JMESPathError, RecursionError, TypeError, ValueError):
        return None
    if node.get("type") != "multi_select_dict":
        return None
    return {
        child["value"]: _inferred(child["children"][0], rooted=True) for child in node["children"]
    }


def _inferred(node: dict[str, Any], *, rooted: bool) -> dict[str, Any]:
    """The schema of what ``node`` yields; ``rooted``: it is evaluated against the mapped
    values themselves (an object, never null), so a multi-select there is never null."""
    kind = node.get("type")
    if kind == "literal":
        return _literal_schema(node.get("value"))
    if kind == "function_expression":
        returns = _RETURNS.get(str(node.get("value")))
        return {} if returns is None else {"type": returns}
    if kind in ("comparator", "not_expression"):
        return {"type": ["boolean", "null"]} if kind == "comparator" else {"type": "boolean"}
    if kind in _LISTS:
        return {"type": ["array", "null"]}
    if kind == "multi_select_list":
        return {"type": "array" if rooted else ["array", "null"]}
    if kind == "multi_select_dict":
        properties = {
            c["value"]: _inferred(c["children"][0], rooted=rooted) for c in node["children"]
        }
        return {"type": "object" if rooted else ["object", "null"], "properties": properties}
    return {}  # a field, a subexpression, a pipe, an index: the data decides


def _literal_schema(value: Any) -> dict[str, Any]:
    if value is None:
        return {"type": "null"}
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    return {"type": "array"} if isinstance(value, list) else {"type": "object"}
