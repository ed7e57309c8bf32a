"""Poll triggers: an http tool called every ``every`` seconds; each item of its answer
not seen before, by its ``dedup_key``, starts one run (``triggers:`` in a workflow
file, ``docs/triggers.md``).

Beat's tick (``polls_due``) claims each poll trigger whose time has come by moving its
``next_poll_at`` with a compare-and-set, so two beats, or a tick that comes again
while a poll is slow, queue one poll; the poll itself (``poll_trigger``) runs on a
worker. It calls the tool from its stored cursor, outside any transaction, then in one
transaction records one ``TriggerEvent`` per new item (key ``item:DEDUP_KEY``, unique
per trigger), creates its run, and stores the next cursor; the runs start once that
has committed. So:

- a process killed before the commit leaves nothing: the next poll reads the same
  page again, from the same cursor, and starts each item once;
- a page that overlaps the one before starts only the items not seen (the event
  rows' unique key; an item already taken is never sent to ``run_create``); an item is
  named by the tool and its dedup key (``item:TOOL:KEY``), looked up over all the
  workflow's events, so a version that moves the poll or changes its arguments starts
  no item twice;
- two polls of one trigger at once (a lost claim's lease, an operator's ``pollnow``)
  start each item once, and only a poll that read the cursor still stored moves it;
- a run whose start was lost after the commit is started by the trigger sweep
  (``triggers.events.triggers_sweep``), as an ``on_workflow`` event's is.

A failed call (the API down, an answer that is not a list where ``items`` says) keeps
the cursor and records the error on the trigger, masked; the next poll tries again. So
does a workflow that refuses runs for a reason of its own (a tool changed since
approval): the poll takes no item, so none is lost. An item whose own inputs are
refused is recorded as refused, once.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from runs.engine.build import outside_run_call_context
from runs.models import RunTrigger
from runs.services import run_create
from tools.errors import FlowpilotError
from tools.paths import get, parse_path
from tools.pins import tool_pin_changes
from tools.redaction import Redactor
from tools.registry import ToolRegistry
from triggers.events import Starter, declared_fingerprint, start_logged
from triggers.models import EventOutcome, EventTrigger, TriggerEvent, TriggerKind
from workflows.event_refs import CURSOR, ITEM, EventRefError, parse_event_value, resolve_event_value
from workflows.inputs import InputsInvalid
from workflows.models import Workflow
from workflows.schema_triggers import PollSpec, TriggerSpec
from workflows.selectors import workflow_get_runnable
from workflows.services import workflow_spec

logger = logging.getLogger("flowpilot.triggers")

# An event key is at most this long (its column's size); a longer one keeps the dedup
# key's sha256 instead.
MAX_KEY_CHARS = 200
# Keys looked up per query (under SQLite's bound on a statement's parameters).
KEYS_PER_QUERY = 500
# Sends the poll of a claimed trigger to the workers.
Sender = Callable[[int], None]


@dataclass
class PollOutcome:
    """What one poll did: the items its page held, the runs it started, the items seen
    before, the items refused (their reason on each event), the items with no key, and
    the error that stopped it (empty: none)."""

    trigger: str
    items: int = 0
    started: list[int] = field(default_factory=list)
    seen: int = 0
    refused: int = 0
    unkeyed: int = 0
    cursor_moved: bool = False
    error: str = ""


def polls_due(*, now: datetime, send: Sender, limit: int = 200) -> list[int]:
    """Claim each poll trigger due by ``now`` and send its poll (beat's tick): the ids
    sent. A claim moves ``next_poll_at`` one interval on, only if no one moved it since
    it was read, so each due time is polled once; a send that fails is logged, and the
    trigger is polled at its next due time."""
    due = (
        EventTrigger.objects.filter(kind=TriggerKind.POLL, next_poll_at__lte=now)
        .order_by("next_poll_at", "pk")
        .values_list("pk", "next_poll_at", "every_seconds")[:limit]
    )
    sent = []
    for pk, at, every in due:
        if at is None:  # the filter excludes it; says so to the type checker
            continue
        interval = timedelta(seconds=every or 60)
        following = at + interval if at + interval > now else now + interval
        if not EventTrigger.objects.filter(pk=pk, next_poll_at=at).update(next_poll_at=following):
            continue  # another beat claimed it
        try:
            send(pk)
        except Exception as exc:  # noqa: BLE001 - the next due time polls it again
            logger.warning(
                "poll trigger %s: not sent (%s: %s); polled again at %s",
                pk, type(exc).__name__, exc, following.isoformat(),
            )  # fmt: skip
            continue
        sent.append(pk)
    return sent


def polls_make_due(*, trigger_ids: list[int], now: datetime | None = None) -> int:
    """Make these poll triggers due now (**Poll now**: beat's next tick polls them); how
    many were poll triggers."""
    rows = EventTrigger.objects.filter(pk__in=trigger_ids, kind=TriggerKind.POLL)
    return rows.update(next_poll_at=now or timezone.now())


def poll_trigger(
    *, trigger_id: int, start: Starter, registry: ToolRegistry | None = None
) -> PollOutcome | None:
    """Poll trigger ``trigger_id`` once: None when it is no longer the active version's
    (archived, replaced, or its poll changed), else what the poll did."""
    row = EventTrigger.objects.filter(pk=trigger_id, kind=TriggerKind.POLL).first()
    if row is None:
        return None
    try:
        workflow = workflow_get_runnable(name=row.workflow_name)
    except FlowpilotError:
        return None
    declared = workflow_spec(workflow).triggers
    trigger = declared[row.position] if row.position < len(declared) else None
    if trigger is None or trigger.poll is None:
        return None
    if declared_fingerprint(row.position, trigger) != row.fingerprint:
        return None  # the row is older than the version now active
    return _Poll(row, workflow, trigger, trigger.poll, registry or ToolRegistry.from_db()).run(
        start
    )


class _Poll:
    """One poll of one trigger: the call, the items, the transaction."""

    def __init__(
        self,
        row: EventTrigger,
        workflow: Workflow,
        trigger: TriggerSpec,
        poll: PollSpec,
        registry: ToolRegistry,
    ) -> None:
        self.row, self.workflow, self.trigger, self.poll = row, workflow, trigger, poll
        self.registry = registry
        self.outcome = PollOutcome(trigger=f"{row.workflow_name}[{row.position}]")
        self.redactor: Redactor | None = None

    def run(self, start: Starter) -> PollOutcome:
        version = self.row.cursor_version
        cursor = self.row.cursor if version else (self.poll.cursor and self.poll.cursor.initial)
        try:
            output = self._call(cursor)
            items = self._items(output)
        except (FlowpilotError, EventRefError, PollError) as exc:
            return self._failed(str(exc))
        self.outcome.items = len(items)
        keyed = self._keyed(items)
        taken = self._taken([key for key, _ in keyed])
        new = [(key, item) for key, item in keyed if key not in taken]
        self.outcome.seen = len(keyed) - len(new)
        try:
            return self._store(start, version, output, items, new)
        except PollAborted as exc:  # rolled back: the cursor stays, the items wait
            self.outcome.started, self.outcome.refused = [], 0
            return self._failed(str(exc))

    def _store(
        self,
        start: Starter,
        version: int,
        output: Any,
        items: list[Any],
        new: list[tuple[str, Any]],
    ) -> PollOutcome:
        """One transaction: an event and a run per new item, then the next cursor."""
        with transaction.atomic():
            stored = (
                EventTrigger.objects.select_for_update()
                .filter(pk=self.row.pk)
                .values_list("cursor_version", flat=True)
                .first()
            )
            if stored is None:
                return self.outcome  # the trigger went (a new version) while it was called
            events = [e for e in (self._take(key, item) for key, item in new) if e is not None]
            changes: dict[str, Any] = {"polled_at": timezone.now(), "last_error": ""}
            if stored == version:  # no other poll stored a cursor since this one read it
                after = self._next_cursor(output, items)
                if after is not None:
                    changes.update(cursor=after, cursor_version=F("cursor_version") + 1)
                    self.outcome.cursor_moved = True
            EventTrigger.objects.filter(pk=self.row.pk).update(**changes)
            self.outcome.started = [e.run_id for e in events if e.run_id is not None]
            transaction.on_commit(partial(_start_all, start, list(self.outcome.started)))
        if self.outcome.started or self.outcome.refused:
            logger.info(
                "poll trigger %s: %d items, %d new runs, %d refused, %d seen before",
                self.outcome.trigger, self.outcome.items, len(self.outcome.started),
                self.outcome.refused, self.outcome.seen,
            )  # fmt: skip
        return self.outcome

    def _call(self, cursor: Any) -> Any:
        spec = self.registry.get(self.poll.tool)
        if spec is None:
            raise PollError(f"tool `{self.poll.tool}` is not registered")
        if spec.kind != "http":
            kind = spec.kind
            raise PollError(f"tool `{self.poll.tool}` is a {kind} tool: a poll calls http tools")
        pinned = (self.workflow.tool_pins or {}).get(self.poll.tool)
        if pinned is not None:  # as a run does: the tool as it was approved, or no call
            for name, what in tool_pin_changes(
                pins={self.poll.tool: pinned}, registry=self.registry
            ):
                raise PollError(
                    f"tool `{name}` changed since `{self.workflow}` was approved: {what}; "
                    "re-approve the version to poll it with the new definition"
                )
        args = resolve_event_value(parse_event_value(self.poll.args, CURSOR), cursor)
        ctx = outside_run_call_context(tool=self.poll.tool, registry=self.registry)
        self.redactor = ctx.redactor
        return self.registry.call(self.poll.tool, args, ctx).output

    def _items(self, output: Any) -> list[Any]:
        items = get(output, parse_path(self.poll.items)) if self.poll.items else output
        if not isinstance(items, list):
            where = f"`items` (`{self.poll.items}`)" if self.poll.items else "the tool's output"
            raise PollError(
                f"{where} is {_kind(items)}, not a list of items; set `items` to the path of "
                "the list in the answer (an answer that is a JSON list is the tool's `items`)"
            )
        return items

    def _keyed(self, items: list[Any]) -> list[tuple[str, Any]]:
        """The items with a key, each key once (the first of a page wins)."""
        path = parse_path(self.poll.dedup_key)
        keyed: dict[str, Any] = {}
        for item in items:
            value = get(item, path)
            if value is None:
                self.outcome.unkeyed += 1
                continue
            keyed.setdefault(event_key(self.poll.tool, value), item)
        if self.outcome.unkeyed:
            logger.warning(
                "poll trigger %s: %d items have no `%s`; they start nothing",
                self.outcome.trigger, self.outcome.unkeyed, self.poll.dedup_key,
            )  # fmt: skip
        return list(keyed.items())

    def _taken(self, keys: list[str]) -> set[str]:
        taken: set[str] = set()
        events = TriggerEvent.objects.filter(workflow_name=self.row.workflow_name)
        for at in range(0, len(keys), KEYS_PER_QUERY):
            chunk = keys[at : at + KEYS_PER_QUERY]
            taken.update(events.filter(event_key__in=chunk).values_list("event_key", flat=True))
        return taken

    def _take(self, key: str, item: Any) -> TriggerEvent | None:
        try:
            with transaction.atomic():
                event = TriggerEvent.objects.create(
                    workflow_name=self.row.workflow_name,
                    position=self.row.position,
                    event_key=key,
                    outcome=EventOutcome.STARTED,
                )
        except IntegrityError:
            self.outcome.seen += 1  # another poll took it meanwhile
            return None
        try:
            inputs = {
                name: resolve_event_value(parse_event_value(value, ITEM), item)
                for name, value in self.trigger.inputs.items()
            }
            with transaction.atomic():
                event.run = run_create(
                    workflow=self.workflow, trigger=RunTrigger.EVENT, inputs=inputs
                )
        except (InputsInvalid, EventRefError) as exc:  # this item's inputs: refused alone
            event.outcome, event.message = EventOutcome.REFUSED, self._masked(str(exc))
            self.outcome.refused += 1
        except FlowpilotError as exc:  # the workflow cannot run now: no item is taken
            raise PollAborted(str(exc)) from exc
        event.save(update_fields=["run", "outcome", "message"])
        return event

    def _next_cursor(self, output: Any, items: list[Any]) -> Any:
        spec = self.poll.cursor
        if spec is None:
            return None
        source, _, rest = spec.next.partition(".")
        path = parse_path(rest) if rest else ()
        if source == "$output":
            return get(output, path)
        if not items:
            return None
        if source == "$last":
            return get(items[-1], path)
        values = [v for v in (get(item, path) for item in items) if v is not None]
        try:
            return max(values, default=None)
        except TypeError:
            logger.warning(
                "poll trigger %s: `%s` holds values that do not compare; the cursor stays",
                self.outcome.trigger, spec.next,
            )  # fmt: skip
            return None

    def _failed(self, message: str) -> PollOutcome:
        self.outcome.error = self._masked(message)
        EventTrigger.objects.filter(pk=self.row.pk).update(
            polled_at=timezone.now(), last_error=self.outcome.error
        )
        logger.warning("poll trigger %s: %s", self.outcome.trigger, self.outcome.error)
        return self.outcome

    def _masked(self, text: str) -> str:
        return text if self.redactor is None else self.redactor.scrub_text(text)


class PollError(FlowpilotError):
    """A poll that could not read its items (no such tool, no list where `items` says)."""

    code = "poll_failed"


class PollAborted(FlowpilotError):
    """The workflow refused a run for a reason of its own (not the item's inputs): a
    tool changed since approval, the version no longer runnable. The poll takes no item
    and keeps its cursor, so the items start runs once it can run again."""

    code = "poll_aborted"


def _start_all(start: Starter, run_ids: list[int]) -> None:
    for run_id in run_ids:
        start_logged(start, run_id)


def event_key(tool: str, value: Any) -> str:
    """The event key of an item of ``tool`` whose dedup key is ``value``:
    ``item:TOOL:`` and the value as text (JSON for an object or a list), or its sha256
    when that is long. The key names the item, not the trigger's place in the file: a
    version that moves the poll, or changes its arguments, starts no item twice."""
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
    key = f"item:{tool}:{text}"
    if len(key) > MAX_KEY_CHARS:
        return f"item:{tool}:sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return key


def _kind(value: Any) -> str:
    if value is None:
        return "null (nothing there)"
    return {dict: "an object", str: "a string", bool: "a boolean"}.get(
        type(value), f"a {type(value).__name__}"
    )
