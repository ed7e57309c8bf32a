"""Run creation that a client may repeat: one ``Idempotency-Key``, one run.

A network client that times out does not know whether its run was created; it
sends the same request again with the same key. ``run_create_idempotent`` returns
the run that key created, never a second one, even when two requests race: the
key row and the run are inserted in one transaction and the database's unique
constraint on (user, key) decides which one wins; the loser's transaction rolls
back (its run with it) and it answers with the winner's run. ``run_once`` is the
same for any way of creating a run; the API's restart uses it with
``restart_fingerprint`` (the run restarted and the step).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from django.db import IntegrityError, transaction

from runs.models import Run, RunIdempotencyKey
from runs.services import RunError, run_create, run_enqueue
from tools.registry import ToolRegistry
from workflows.models import Workflow

if TYPE_CHECKING:
    from django.contrib.auth.models import User

MAX_KEY_LENGTH = 255


class IdempotencyKeyReused(RunError):
    """The key was already used for a different request (another version or inputs)."""

    code = "idempotency_key_reused"


class IdempotencyKeyInvalid(RunError):
    code = "idempotency_key_invalid"


def run_fingerprint(*, workflow: Workflow, inputs: Mapping[str, Any]) -> str:
    """What a request asked for: the version and the inputs as sent (canonical JSON)."""
    text = json.dumps([workflow.pk, dict(inputs)], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def restart_fingerprint(*, run: Run, from_step: str | None, version: int | None = None) -> str:
    """What a restart request asked for: the run restarted, the step (None: the trigger)
    and the version number it restarts onto (None: its own)."""
    asked: list = ["restart", run.pk, from_step]
    if version is not None:  # a restart on its own version keeps its earlier fingerprint
        asked.append(version)
    text = json.dumps(asked, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_create_idempotent(
    *,
    workflow: Workflow,
    trigger: str,
    inputs: Mapping[str, Any] | None,
    user: User,
    key: str | None,
    registry: ToolRegistry | None = None,
) -> tuple[Run, bool]:
    """Create and enqueue a run, or return the run ``key`` created before.

    Returns ``(run, created)``. Without a key every call creates a run. A key reused
    with another version or other inputs raises ``IdempotencyKeyReused``. Only the
    request that created the run enqueues it.
    """
    inputs = dict(inputs or {})
    return run_once(
        user=user,
        key=key,
        fingerprint=run_fingerprint(workflow=workflow, inputs=inputs) if key is not None else "",
        create=lambda: run_create(
            workflow=workflow, trigger=trigger, inputs=inputs, registry=registry, started_by=user
        ),
    )


def run_once(
    *, user: User, key: str | None, fingerprint: str, create: Callable[[], Run]
) -> tuple[Run, bool]:
    """``create()`` a pending run and enqueue it, once per (user, ``key``).

    Returns ``(run, created)``. Without a key every call creates a run. The same key
    with the same ``fingerprint`` (what the request asked for) returns the run it
    created; with another fingerprint it raises ``IdempotencyKeyReused``. The key row
    and the run are written in one transaction, so a refusal by ``create`` stores
    neither, and only the request that created the run enqueues it.
    """
    if key is None:
        return run_enqueue(run=create()), True
    if not key.strip() or len(key) > MAX_KEY_LENGTH or not key.isprintable():
        raise IdempotencyKeyInvalid(
            f"the Idempotency-Key must be 1 to {MAX_KEY_LENGTH} printable characters"
        )
    existing = _existing(user=user, key=key, fingerprint=fingerprint)
    if existing is not None:
        return existing, False
    try:
        with transaction.atomic():
            run = create()
            RunIdempotencyKey.objects.create(user=user, key=key, fingerprint=fingerprint, run=run)
    except IntegrityError:
        # A concurrent request with this key committed first: answer with its run.
        existing = _existing(user=user, key=key, fingerprint=fingerprint)
        if existing is None:  # pragma: no cover - the constraint that failed names this row
            raise
        return existing, False
    return run_enqueue(run=run), True


def _existing(*, user: User, key: str, fingerprint: str) -> Run | None:
    row = RunIdempotencyKey.objects.select_related("run").filter(user=user, key=key).first()
    if row is None:
        return None
    if row.fingerprint != fingerprint:
        raise IdempotencyKeyReused(
            f"the Idempotency-Key `{key}` was used for another request (run {row.run_id}); "
            "use a new key for a new run"
        )
    return row.run
