"""Worker queue names: what a tool file or a workflow may write as ``queue``.

A team gives slow or sensitive tools their own Celery workers by naming a queue on the
tool (``queue: heavy``) or on the workflow; the engine publishes the step tasks there and
a worker started with ``-Q heavy`` consumes them (docs/limits.md, "Worker routing").

The name is checked here, in the lowest layer, so a tool file and a workflow file give
the same error. Only a plain name is accepted: letters, digits, ``_``, ``.`` and ``-``,
at most 64 characters, starting with a letter or digit. Celery's own control and event
queues (``celery.pidbox``, ``celeryev.*``, a ``*.pidbox`` or ``*.reply.celery.pidbox``
name) are refused: a step task published there would be read by Celery's remote control
or event machinery, never run.
"""

from __future__ import annotations

import re

QUEUE_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
_RESERVED_PREFIXES = ("celeryev.", "celery.pidbox")
_RESERVED_SUFFIXES = (".pidbox",)


def queue_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a worker queue (a sentence), or None when it can."""
    if not re.match(QUEUE_NAME_PATTERN, name):
        return (
            f"queue name {name!r} must be 1 to 64 letters, digits, `_`, `.` or `-`, "
            "starting with a letter or digit"
        )
    lowered = name.lower()
    if lowered.startswith(_RESERVED_PREFIXES) or lowered.endswith(_RESERVED_SUFFIXES):
        return f"queue name {name!r} is one of Celery's own control or event queues"
    return None


def check_queue_name(name: str | None) -> str | None:
    """A pydantic field validator's body: the name unchanged, or ``ValueError``."""
    if name is None:
        return None
    problem = queue_name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name
