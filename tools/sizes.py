"""One rule for size in flight: how big a value is, and the error for one too big.

Every value a step produces or receives — a tool's decoded response, a transform's
result, the resolved arguments, a rendered template or prompt, a ``foreach`` item
list, an LLM reply — is measured with :func:`json_bytes` and refused past the step's
cap (``FLOWPILOT_MAX_STEP_OUTPUT_BYTES``, or the step's ``max_output_bytes``) with
:class:`OutputTooLarge` *before* it is copied, stored or handed to the next step.

**The measure.** The size is that of the value as compact JSON text in UTF-8 (no
spaces after ``,`` and ``:``), escapes counted as written: a NUL is ``\\u0000`` (6
bytes), a quote ``\\"`` (2), a lone surrogate ``\\udXXX`` (6). It is computed without
building the text and without copying: the walk is iterative (no depth overflows
the stack), and a sub-object reached twice (mapping one value eight times gives
eight references to one object) is measured once and counted each time it occurs,
so measuring costs O(unique nodes) while the result is the size the copies *would*
have. A ``memo`` passed between calls keeps those sizes across measurements of
values that share parts (a JMESPath evaluation's intermediate results).
"""

from __future__ import annotations

import json
import re
from typing import Any

from tools.errors import FlowpilotError

_SURROGATE = re.compile("[\ud800-\udfff]")
_PIECE = 1 << 20  # characters of one string encoded at a time (bounds the transient copy)
_encode_text = json.encoder.encode_basestring

Memo = dict[int, tuple[Any, int]]  # id -> (the object, kept alive while the id is used; size)


class OutputTooLarge(FlowpilotError):
    """A value a step built is over its size cap (fatal: the same input builds it again).

    Declares what the stored error says: ``step`` (its id), ``what`` (``output``,
    ``arguments``, ``response``, ``template``, ``transform``, ``items``), ``size`` (bytes
    as JSON; for a value refused while it was read or built, the size reached when it
    was stopped, ``at_least``) and ``cap``.
    """

    code = "output_too_large"
    retryable = False

    def __init__(
        self, *, step: str, what: str, size: int, cap: int, at_least: bool = False
    ) -> None:
        self.step = step
        self.what = what
        self.size = size
        self.cap = cap
        self.at_least = at_least
        more = "more than " if at_least else ""
        who = f"step `{step}`" if step else "the step"
        super().__init__(
            f"{who}: the {what} is {more}{size} bytes, over the {cap} byte cap "
            "(FLOWPILOT_MAX_STEP_OUTPUT_BYTES or the step's max_output_bytes); "
            "nothing of it was kept"
        )

    def for_step(self, step: str) -> OutputTooLarge:
        """The same refusal naming ``step`` (a tool does not know which step called it)."""
        if self.step:
            return self
        return OutputTooLarge(
            step=step, what=self.what, size=self.size, cap=self.cap, at_least=self.at_least
        )

    def as_dict(self) -> dict:
        return {
            **super().as_dict(),
            "step": self.step,
            "what": self.what,
            "size": self.size,
            "cap": self.cap,
        }


def text_bytes(text: str) -> int:
    """The size of ``text`` as a JSON string (quotes and escapes included), in UTF-8."""
    size = 2
    for start in range(0, len(text), _PIECE):
        piece = text[start : start + _PIECE]
        escaped = _encode_text(piece)
        if piece.isascii():
            size += len(escaped) - 2
            continue
        lone = len(_SURROGATE.findall(piece))
        size += len(escaped.encode("utf-8", "surrogatepass")) - 2 + 3 * lone
    return size


def _scalar_bytes(value: Any) -> int:
    if isinstance(value, str):
        return text_bytes(value)
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, int):
        return len(str(value))
    if isinstance(value, float):
        return len(json.dumps(value))
    return len(json.dumps(str(value)))  # not JSON data: measured as its text


def json_bytes(value: Any, memo: Memo | None = None) -> int:
    """The size of ``value`` as compact JSON (see the module docstring); iterative and
    O(unique nodes): shared sub-objects are measured once (``memo``, by ``id``)."""
    if not isinstance(value, dict | list | tuple):
        return _scalar_bytes(value)
    memo = {} if memo is None else memo
    open_: set[int] = set()  # containers being measured: met again below itself, a cycle
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        node, done = stack.pop()
        if done:
            open_.discard(id(node))
            memo[id(node)] = (node, _container_bytes(node, memo))
            continue
        if id(node) in memo:
            continue
        if id(node) in open_:
            raise ValueError("the value contains itself; it is not JSON data")
        open_.add(id(node))
        stack.append((node, True))
        children = node.values() if isinstance(node, dict) else node
        stack.extend(
            (child, False)
            for child in children
            if isinstance(child, dict | list | tuple) and id(child) not in memo
        )
    return memo[id(value)][1]


def _container_bytes(node: Any, memo: Memo) -> int:
    """A container's size once every child container is in ``memo``."""
    count = len(node)
    size = 2 + max(count - 1, 0)  # brackets and commas
    if isinstance(node, dict):
        size += count  # the colons
        size += sum(_scalar_bytes(str(key)) for key in node)
        items = node.values()
    else:
        items = node
    for child in items:
        kept = memo.get(id(child)) if isinstance(child, dict | list | tuple) else None
        size += kept[1] if kept is not None else _scalar_bytes(child)
    return size


def check_size(value: Any, *, cap: int, step: str, what: str, memo: Memo | None = None) -> int:
    """``value``'s size, or :class:`OutputTooLarge` when it is over ``cap``."""
    size = json_bytes(value, memo)
    if size > cap:
        raise OutputTooLarge(step=step, what=what, size=size, cap=cap)
    return size
