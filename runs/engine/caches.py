"""Per-process caches of what every run of a version shares: immutable values, bounded.

A run used to parse its definition, build its graph and parsed mappings, rebuild the
tool registry (re-checking every built-in tool's JSON Schema) and re-validate the
version, twice per run. All of that depends only on the definition and on the tool
table, so it is built once per process and shared:

- the parsed spec and the compiled plan (``runs.engine.plan``), by a digest of the
  stored definition itself (a definition edited in place, behind the hash's back, is a new key);
- the tool registry, by the tool table's state (``tools_state``: one aggregate
  query, newest ``updated_at``, row counts, the built-in providers setting);
- the validation report, by (definition digest, tool table state, env allowlist).

Every cached value is immutable (frozen dataclasses, read-only mappings, a registry
that only memoises its own schema validators), so sharing one never lets a run see
another's state; per-run objects (``RunContext``, ``Readiness``) are still built per
run from them. Each cache is a small LRU, so a process holds a bounded number. A
changed tool changes the table's state, so the next run builds a new registry and
validates again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, TypeVar

from django.conf import settings
from django.db import connection

from runs.engine.plan import CompiledPlan, compile_plan
from tools.models import Tool
from tools.registry import ToolRegistry
from tools.statements import bound_cursor
from workflows.models import Workflow
from workflows.schema import WorkflowSpec
from workflows.services import workflow_spec
from workflows.validation.env_access import env_allowlist
from workflows.validation.report import ValidationReport
from workflows.validator import validate_workflow

V = TypeVar("V")


class LRU(Generic[V]):
    """A bounded, thread-safe map that builds a missing value once and keeps the newest."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, build: Callable[[], V]) -> V:
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return self._items[key]
        value = build()  # outside the lock: a slow build never blocks other keys
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        return len(self._items)


SPECS: LRU[WorkflowSpec] = LRU(64)
PLANS: LRU[CompiledPlan] = LRU(64)
REGISTRIES: LRU[ToolRegistry] = LRU(4)
REPORTS: LRU[ValidationReport] = LRU(128)


def tools_state() -> tuple[Any, ...]:
    """The tool table's state, in one query, plus the providers setting.

    Any change a registry could see moves it: ``tool_upsert`` and ``tools_set_enabled``
    stamp ``updated_at``, an insert or delete changes the count. A plain statement (the
    ORM's aggregate costs more to build than to run), the same on every database.
    """
    with bound_cursor(connection) as cursor:
        cursor.execute(tools_state_sql())
        updated, count, enabled = cursor.fetchone()
    return state_key(updated, count, enabled or 0)


def tools_state_sql() -> str:
    """The statement of ``tools_state``'s three values (a sub-select of other reads)."""
    return _tools_state_sql(connection.vendor)


@functools.cache
def _tools_state_sql(vendor: str) -> str:
    quote, opts = connection.ops.quote_name, Tool._meta
    updated, enabled = quote("updated_at"), quote("enabled")  # the fields' own column names
    return (
        f"SELECT MAX({updated}), COUNT(*), "  # noqa: S608 - names from the model's metadata
        f"SUM(CASE WHEN {enabled} THEN 1 ELSE 0 END) FROM {quote(opts.db_table)}"
    )


def state_key(updated: Any, count: int, enabled: int) -> tuple[Any, ...]:
    providers = tuple(settings.FLOWPILOT_BUILTIN_PROVIDERS)
    return (updated, count, enabled, providers)


def registry_for(state: tuple[Any, ...]) -> ToolRegistry:
    """The registry of the tool table in ``state`` (``tools_state()``), built once."""
    return REGISTRIES.get(state, ToolRegistry.from_db)


def definition_digest(definition: Any) -> str:
    """A digest of a stored definition as loaded: the key of its compiled plan."""
    text = json.dumps(definition, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def spec_for(workflow: Workflow) -> tuple[str, WorkflowSpec]:
    """``(digest, spec)`` of ``workflow``'s stored definition, parsed once.

    Raises ``WorkflowError`` when the stored JSON no longer fits the format (never
    cached: a failed build stores nothing).
    """
    digest = definition_digest(workflow.definition)
    return digest, SPECS.get(digest, lambda: workflow_spec(workflow))


def plan_for(workflow: Workflow) -> CompiledPlan:
    """The compiled plan of ``workflow``'s stored definition (``GraphError`` when its
    steps do not form a DAG: validate first)."""
    digest, spec = spec_for(workflow)
    return PLANS.get(digest, lambda: compile_plan(spec))


def plan_for_version(definition_hash: str, spec: Callable[[], WorkflowSpec]) -> CompiledPlan:
    """The compiled plan of an approved version, by its ``definition_hash`` (a version
    never changes: a new definition is a new version with a new hash). For a task that
    has the run's hash but not its definition; ``spec`` parses it on a miss."""
    return PLANS.get(("version", definition_hash), lambda: compile_plan(spec()))


def validation_for(
    workflow: Workflow, *, state: tuple[Any, ...], registry: ToolRegistry
) -> ValidationReport:
    """``validate_workflow`` of the stored definition against ``registry`` (the
    registry of ``state``), once per definition, tool table state and env allowlist."""
    digest, spec = spec_for(workflow)
    key = (digest, state, env_allowlist())
    return REPORTS.get(key, lambda: validate_workflow(spec, registry=registry))


def caches_clear() -> None:
    """Forget every cached value (tests; a long-lived process never needs to)."""
    for cache in (SPECS, PLANS, REGISTRIES, REPORTS):
        cache.clear()
