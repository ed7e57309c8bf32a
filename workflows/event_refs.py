"""What starts a run from an event (``triggers:`` in a workflow file) reads of it: what
``$event.…``, ``$item.…`` and ``$cursor.…`` references mean, parsed once, resolved
against the event.

====================  ==========================================  ======================
form                  meaning                                     example
====================  ==========================================  ======================
``$event.outputs.X``  an ``on_workflow`` trigger's input: an      ``"$event.outputs.total"``
                      output of the finished run (deeper paths
                      allowed: ``$event.outputs.X.0.id``)
``$event.outputs``    all its outputs, as an object               ``"$event.outputs"``
``$event.FIELD``      ``run_id``, ``run_uuid``, ``workflow``,     ``"$event.run_id"``
                      ``version``, ``status``, ``error`` (the
                      run's error summary), ``finished_at``
``$item.PATH``        a poll trigger's input: the new item, or    ``"$item.id"``
                      a part of it (``$item`` alone: all of it)
``$cursor.PATH``      a poll's tool argument: the cursor stored   ``"$cursor"``
                      after the last poll, or a part of it
``{"$literal": x}``   ``x`` as it is                              ``{"$literal": "$5"}``
anything else         a literal constant                          ``"eu"``, ``42``
====================  ==========================================  ======================

Each value is read with one root (``$event``, ``$item`` or ``$cursor``: what the place
it is written in can read). Lists and objects are walked: every string leaf is read the
same way. Paths follow the one dot-path rule of :mod:`tools.paths`; a path to absent
data resolves to null. Any other string starting with ``$`` is refused
(``EventRefError``): a run's own references (``$input``, ``$env``, step outputs) mean
nothing before the run exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tools.paths import PathError, get, parse_path
from workflows.references import Literal
from workflows.schema_triggers import EVENT_FIELDS

EVENT, ITEM, CURSOR = "$event", "$item", "$cursor"
# What each root is read in, for the messages.
_WHERE = {
    EVENT: "an `on_workflow` trigger's inputs read `$event.outputs.NAME` or `$event.FIELD` "
    f"({', '.join(EVENT_FIELDS)})",
    ITEM: "a poll trigger's inputs read `$item` or `$item.PATH` (the new item)",
    CURSOR: "a poll's tool arguments read `$cursor` or `$cursor.PATH` (the stored cursor)",
}


class EventRefError(ValueError):
    """A ``$`` string that is not a valid reference of its place."""


@dataclass(frozen=True, slots=True)
class EventRef:
    root: str  # EVENT, ITEM or CURSOR
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        return ".".join((self.root, *self.path))


def parse_event_value(value: Any, root: str = EVENT) -> Any:
    """``value`` with every ``root`` string as an ``EventRef`` (``EventRefError``: a
    ``$`` string that is none)."""
    if isinstance(value, str):
        return _parse(value, root) if value.startswith("$") else value
    if isinstance(value, Mapping):
        if set(value) == {"$literal"}:
            return Literal(value["$literal"])
        return {key: parse_event_value(item, root) for key, item in value.items()}
    if isinstance(value, list):
        return [parse_event_value(item, root) for item in value]
    return value


def _parse(text: str, root: str) -> EventRef:
    head, _, rest = text.partition(".")
    if head != root:
        noun = "an event" if root == EVENT else f"a `{root}`"
        raise EventRefError(f"`{text}` is not {noun} reference: {_WHERE[root]}, or are literals")
    if not rest:
        if root == EVENT:
            raise EventRefError(f"`{text}` names no field of the event ({', '.join(EVENT_FIELDS)})")
        return EventRef(root)
    try:
        path = parse_path(rest)
    except PathError as exc:
        raise EventRefError(f"`{text}`: {exc}") from None
    if root == EVENT:
        field = path[0]
        if field not in EVENT_FIELDS:
            raise EventRefError(
                f"`{text}`: the event has no field `{field}`; it has {', '.join(EVENT_FIELDS)}"
            )
        if len(path) > 1 and field != "outputs":
            raise EventRefError(f"`{text}`: `{field}` is a single value; only `outputs` has parts")
    return EventRef(root, path)


def resolve_event_value(parsed: Any, value: Any) -> Any:
    """The value ``parsed`` stands for, given what its root names: the event (a mapping
    of ``EVENT_FIELDS``), the item or the cursor."""
    if isinstance(parsed, EventRef):
        return get(value, parsed.path) if parsed.path else value
    if isinstance(parsed, Literal):
        return parsed.value
    if isinstance(parsed, dict):
        return {key: resolve_event_value(item, value) for key, item in parsed.items()}
    if isinstance(parsed, list):
        return [resolve_event_value(item, value) for item in parsed]
    return parsed
