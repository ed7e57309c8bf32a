"""The one error of the condition language, and how its messages point at the text."""

from __future__ import annotations

from tools.errors import FlowpilotError

_SHOWN = 120  # longer sources are shown as a window around the error


class ExpressionError(FlowpilotError):
    """A condition that cannot be parsed, fails a static check, or misuses a type at run time.

    ``source`` is the condition text; ``column`` (1-based, counted from the start of
    the text) points at the offending token when there is one.
    """

    code = "expression_invalid"

    def __init__(self, message: str, *, source: str = "", column: int | None = None) -> None:
        super().__init__(message)
        self.source = source
        self.column = column


def located(reason: str, *, source: str, pos: int, hint: str = "") -> ExpressionError:
    """``"<reason> at column N in `<source>`[; <hint>]"`` for the 0-based offset ``pos``."""
    message = f"{reason} at column {pos + 1} in `{excerpt(source, pos)}`"
    if hint:
        message = f"{message}; {hint}"
    return ExpressionError(message, source=source, column=pos + 1)


def excerpt(source: str, pos: int = 0) -> str:
    """The source on one line, cut to a window around ``pos`` when it is long."""
    flat = source.replace("\r", " ").replace("\n", " ")
    if len(flat) <= _SHOWN:
        return flat
    start = max(0, min(pos - _SHOWN // 2, len(flat) - _SHOWN))
    end = start + _SHOWN
    return ("…" if start else "") + flat[start:end] + ("…" if end < len(flat) else "")
