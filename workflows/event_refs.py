"""The inputs of a run an event starts (``triggers:`` in a workflow file): what
``$event.…`` references mean, parsed once, resolved against the event.

====================  ==========================================  ======================
form                  meaning                                     example
====================  ==========================================  ======================
``$event.outputs.X``  an output of the finished run (deeper       ``"$event.outputs.total"``
                      paths allowed: ``$event.outputs.X.0.id``)
``$event.outputs``    all its outputs, as an object               ``"$event.outputs"``
``$event.FIELD``      ``run_id``, ``run_uuid``, ``workflow``,     ``"$event.run_id"``
                      ``version``, ``status``, ``error`` (the
                      run's error summary), ``finished_at``
``{"$literal": x}``   ``x`` as it is                              ``{"$literal": "$5"}``
anything else         a literal constant                          ``"eu"``, ``42``
====================  ==========================================  ======================

Lists and objects are walked: every string leaf is read the same way. Paths follow the
one dot-path rule of :mod:`tools.paths`; a path to absent data resolves to null. Any
other string starting with ``$`` is refused (``EventRefError``): a run's own references
(``$input``, ``$env``, step outputs) mean nothing before the run exists.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tools.paths import PathError, get, parse_path
from workflows.references import Literal
from workflows.schema_triggers import EVENT_FIELDS

PREFIX = "$event"


class EventRefError(ValueError):
    """A ``$`` string that is not a valid ``$event`` reference."""


@dataclass(frozen=True, slots=True)
class EventRef:
    field: str
    path: tuple[str, ...] = ()

    def __str__(self) -> str:
        return ".".join((PREFIX, self.field, *self.path))


def parse_event_value(value: Any) -> Any:
    """``value`` with every ``$event`` string as an ``EventRef`` (``EventRefError``: a
    ``$`` string that is none)."""
    if isinstance(value, str):
        return _parse(value) if value.startswith("$") else value
    if isinstance(value, Mapping):
        if set(value) == {"$literal"}:
            return Literal(value["$literal"])
        return {key: parse_event_value(item) for key, item in value.items()}
    if isinstance(value, list):
        return [parse_event_value(item) for item in value]
    return value


def _parse(text: str) -> EventRef:
    head, _, rest = text.partition(".")
    if head != PREFIX:
        raise EventRefError(
            f"`{text}` is not an event reference: a trigger's inputs read `$event.outputs.NAME`"
            f" or `$event.FIELD` ({', '.join(EVENT_FIELDS)}), or are literals"
        )
    if not rest:
        raise EventRefError(f"`{text}` names no field of the event ({', '.join(EVENT_FIELDS)})")
    try:
        parts = parse_path(rest)
    except PathError as exc:
        raise EventRefError(f"`{text}`: {exc}") from None
    field, path = parts[0], parts[1:]
    if field not in EVENT_FIELDS:
        raise EventRefError(
            f"`{text}`: the event has no field `{field}`; it has {', '.join(EVENT_FIELDS)}"
        )
    if path and field != "outputs":
        raise EventRefError(f"`{text}`: `{field}` is a single value; only `outputs` has parts")
    return EventRef(field, path)


def resolve_event_value(parsed: Any, event: Mapping[str, Any]) -> Any:
    """The value ``parsed`` stands for, given the event (a mapping of ``EVENT_FIELDS``)."""
    if isinstance(parsed, EventRef):
        return get(event.get(parsed.field), parsed.path) if parsed.path else event.get(parsed.field)
    if isinstance(parsed, Literal):
        return parsed.value
    if isinstance(parsed, dict):
        return {key: resolve_event_value(item, event) for key, item in parsed.items()}
    if isinstance(parsed, list):
        return [resolve_event_value(item, event) for item in parsed]
    return parsed
