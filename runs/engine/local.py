"""The in-process driver: ready steps run in parallel on a thread pool.

The pool has ``steps_at_once`` threads (``FLOWPILOT_MAX_PARALLEL_STEPS``, lowered by the
workflow's ``max_parallel``): a ready step claimed beyond that waits for a thread, so no
more than that many steps of the run call anything at once.

Only this coordinating thread touches the database (SQLite-friendly); worker
threads make the tool calls (the database breaker store is read here too, through
``tools.breaker.run_view``: a step thread makes a statement only for a host whose
breaker has counted a failure). After every finished step its StepResult is written
(the checkpoint) before anything new starts, so a crash loses at most the steps
that were in flight.
"""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from runs.engine import checkpoint
from runs.engine.attempt import StepOutcome, run_with_retries
from runs.engine.context import RunContext
from runs.engine.db_retry import with_db_retries
from runs.engine.finish import run_finish_write
from runs.engine.readiness import Actions, Readiness, StepState
from runs.engine.resolve import resolve_step_call
from runs.models import Run, StepResult
from runs.state import (
    RowWrite,
    RunNotStarted,
    RunStateError,
    RunStatus,
    StepStatus,
    rows_write,
)
from tools.breaker.run_view import REFRESH_SECONDS, in_process_view
from tools.errors import FlowpilotError
from tools.logcontext import log_fields
from workflows.references import StepRef, iter_refs
from workflows.schema import AnyStep

logger = logging.getLogger("flowpilot.engine")

Observer = Callable[[str, StepResult], None]


@dataclass(frozen=True)
class Driven:
    """How a run's steps ended: ``views`` are what each step's references read (full
    outputs, not the capped stored previews); ``results`` the rows as written, so
    finishing the run reads nothing back. ``finished``: None when the caller finishes
    the run (``runs.engine.finish.run_finish``); else the run's finish was written with
    the last turn, and True when it landed (the run was still running): the caller then
    only announces it."""

    views: dict[str, Any]
    results: Mapping[str, StepResult]
    finished: bool | None = None


def drive_local(
    ctx: RunContext,
    run: Run,
    *,
    observer: Observer | None = None,
    results: Mapping[str, StepResult] | None = None,
    start: RowWrite | None = None,
) -> Driven | None:
    """Run every runnable step of ``run``; None when the run was cancelled.

    The checkpoint is read once (unless ``results``: the rows of a run just created and
    never started, as written); from then on each finished step touches only its
    children (``Readiness``), so a step costs the same at any position of any run.
    Each turn is one atomic write: the outcomes of the steps that just finished, the
    skips they decide and the claims of the steps they free commit together, before
    any of those steps is called (``runs.state.rows_write``: on PostgreSQL one
    statement, a round trip and a commit; elsewhere one transaction).

    ``start``: the run's own start (``runs.state.run_write``, pending → running), not yet
    sent: it goes in the first turn's write, ahead of the first claims, which are written
    only if it lands (else ``RunNotStarted``, nothing written). The turn that leaves
    nothing to run writes the run's finish with the last outcomes (``Driven.finished``)
    — unless the run records its calls (``ctx.taps``): those are stored before the run is
    seen finished, so its caller finishes it after flushing them.

    Steps are called on a pool of ``steps_at_once`` threads, created as needed; a turn
    that starts one step while none is in flight (every step of a chain, a one-step run)
    calls it on this thread instead: nothing could overlap it, and the hand-off to a
    pool thread and back was a tenth of a chain step's cost.

    What this thread logs carries the run's ids (``tools.logcontext``); a try sets its
    own, on whichever thread it runs.
    """
    spec = ctx.spec
    results = dict(results) if results is not None else checkpoint.load_results(run)
    ready = Readiness(
        ctx.ready, {sid: checkpoint.state_of(r, spec.step(sid)) for sid, r in results.items()}
    )
    views: dict[str, Any] = {sid: checkpoint.view_of(r) for sid, r in results.items()}
    # Outputs read back from the checkpoint as capped previews cannot feed a step.
    previews = frozenset(
        sid for sid, r in results.items() if r.status == StepStatus.SUCCEEDED and r.output_truncated
    )
    notify = observer or (lambda event, result: None)
    futures: dict[Future, str] = {}
    # Finished futures arrive here (a done callback): a turn waits for one and takes
    # whatever else finished, without walking every future in flight (a wide run has
    # thousands queued on the pool).
    arrived: queue.SimpleQueue[Future] = queue.SimpleQueue()
    done: list[tuple[str, StepOutcome]] = []
    cancel_check = _Every(CANCEL_CHECK_SECONDS)
    cancel_check.due()  # the caller has just moved the run to running: not cancelled
    # Healthy hosts' breakers cost the step threads no statement (tools.breaker.run_view).
    ctx.breakers = in_process_view(ctx.breakers)
    breaker_check = _Every(REFRESH_SECONDS)
    breaker_check.due()  # read just now
    turn = _Turn(ctx, run, results, ready, views, previews, start=start)
    with (
        log_fields(run_id=run.pk, trace_id=ctx.run_uuid.replace("-", "")),
        ThreadPoolExecutor(
            max_workers=steps_at_once(ctx), thread_name_prefix=f"run{run.pk}"
        ) as pool,
    ):
        while True:
            if cancel_check.due() and _cancelled(run):
                _settle_cancelled(ctx, futures, results, notify, done)
                return None
            if ctx.breakers is not None and breaker_check.due():
                ctx.breakers.refresh()
            decided = with_db_retries(
                lambda: turn.write(done),  # noqa: B023
                what=f"recording a turn of run {run.pk}",
            )
            done = []
            started = turn.after_commit(decided, notify)
            alone = len(started) == 1 and not futures
            for step_id, args in started:
                step = spec.step(step_id)
                first = (results[step_id].attempts or 0) + 1
                if alone:  # nothing to overlap it with: no hand-off to a pool thread and back
                    done = [(step_id, run_with_retries(ctx, step, args, first_attempt=first))]
                    break
                future = pool.submit(run_with_retries, ctx, step, args, first_attempt=first)
                futures[future] = step_id
                future.add_done_callback(arrived.put)
            if alone:
                continue
            if not futures:
                if decided.actions.done or not (decided.actions.start or decided.actions.skip):
                    return Driven(views, results, decided.run_finished)
                continue
            finished = _finished(arrived)
            done = [(futures.pop(f), f.result()) for f in sorted(finished, key=futures.__getitem__)]


def steps_at_once(ctx: RunContext) -> int:
    """How many of the run's steps execute at once in process: the site's
    ``FLOWPILOT_MAX_PARALLEL_STEPS``, lowered by the workflow's ``max_parallel``."""
    bound = ctx.spec.max_parallel
    site = ctx.limits.max_parallel_steps
    return site if bound is None else min(site, bound)


def _finished(arrived: queue.SimpleQueue[Future]) -> list[Future]:
    """The futures that finished: wait for one, then take every other already there."""
    finished = [arrived.get()]
    while True:
        try:
            finished.append(arrived.get_nowait())
        except queue.Empty:
            return finished


def _settle_cancelled(
    ctx: RunContext,
    futures: dict[Future, str],
    results: Mapping[str, StepResult],
    notify: Observer,
    done: list[tuple[str, StepOutcome]],
) -> None:
    """The run was cancelled: a step not yet started never starts (skipped); a step in
    flight finishes and its outcome is recorded, so none is left ``running``."""
    for step_id, arrived in done:
        checkpoint.mark_finished(ctx, results[step_id], arrived)
        notify(arrived.status, results[step_id])
    never_started = [results[sid] for future, sid in futures.items() if future.cancel()]
    if never_started:
        checkpoint.mark_skipped(never_started, ctx.now())
        for result in never_started:
            notify(StepStatus.SKIPPED, result)
    for future, step_id in sorted(futures.items(), key=lambda item: item[1]):
        if future.cancelled():
            continue
        outcome: StepOutcome = future.result()
        checkpoint.mark_finished(ctx, results[step_id], outcome)
        notify(outcome.status, results[step_id])


@dataclass
class _Decided:
    """What one turn wrote: finished steps, skips, steps failed before their call, and
    claims (step id, arguments, claimed?)."""

    finished: list[tuple[str, str]]  # (step id, status)
    actions: Actions
    failed: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    claims: list[tuple[str, dict[str, Any], dict[str, Any]]] = field(default_factory=list)
    claimed: list[bool] = field(default_factory=list)
    run_finished: bool | None = None  # the run's finish, written with the turn: landed?


@dataclass(frozen=True)
class _Prepared:
    """A turn's row writes, prepared once: the outcomes, the skips among ``writes``
    (which holds the outcomes, skips and failures before a call), the claims; and the
    run's own start (the first turn) or finish (the last), if the turn writes it."""

    finished: list[RowWrite]
    skips: list[RowWrite]
    writes: list[RowWrite]
    claims: list[RowWrite]
    start: RowWrite | None = None
    finish: RowWrite | None = None


class _Turn:
    """One turn's writes, as one atomic write that can be tried again.

    The decisions (what is skipped, what starts, with which arguments) are made once,
    on the first try, from the rows as the outcomes will leave them; a try that fails
    on a database error writes nothing, the rows' in-memory copies are restored, and
    the next try writes the same decisions again.
    """

    def __init__(
        self,
        ctx: RunContext,
        run: Run,
        results: Mapping[str, StepResult],
        ready: Readiness,
        views: dict[str, Any],
        previews: frozenset[str],
        *,
        start: RowWrite | None = None,
    ) -> None:
        self.ctx, self.run, self.results, self.ready = ctx, run, results, ready
        self.views, self.previews = views, previews
        self.start = start  # the run's start, until the first turn has written it
        self._decided: _Decided | None = None
        # The turn's writes once all are prepared, kept until they land: a try again
        # after a broken connection sends exactly the same writes (the same timestamps),
        # so one that did commit before the connection broke is recognised as written
        # (``runs.state.step_write``) instead of failing the run.
        self._prepared: _Prepared | None = None

    def write(self, done: list[tuple[str, StepOutcome]]) -> _Decided:
        """Write the turn (the outcomes in ``done`` and what they decide); safe to call
        again with the same ``done`` after it raised (``with_db_retries``)."""
        touched = [self.results[sid] for sid, _ in done]
        saved = [dict(r.__dict__) for r in touched]
        try:
            finished: list[RowWrite] = []
            if self._prepared is not None:
                finished = self._prepared.finished
            else:
                for step_id, outcome in done:
                    checkpoint.mark_finished(
                        self.ctx, self.results[step_id], outcome, into=finished
                    )
            for write in finished:  # the rows as written: what the decisions are made from
                write.apply()
            if self._decided is None:
                self._decided = self._decide(done)
            decided = self._decided
            more = [self.results[sid] for sid in decided.actions.skip]
            more += [self.results[sid] for sid, _ in decided.failed]
            more += [self.results[sid] for sid, _, _ in decided.claims]
            touched += more
            saved += [dict(r.__dict__) for r in more]
            self._write_decisions(decided, finished)
        except BaseException:
            for result, state in zip(touched, saved, strict=True):
                result.__dict__.update(state)
            raise
        self._decided = None
        self._prepared = None
        return decided

    def _decide(self, done: list[tuple[str, StepOutcome]]) -> _Decided:
        spec = self.ctx.spec
        for step_id, outcome in done:
            result = self.results[step_id]
            self.ready.settle(step_id, checkpoint.state_of(result, spec.step(step_id)))
            succeeded = outcome.status == StepStatus.SUCCEEDED
            self.views[step_id] = outcome.output if succeeded else {"error": outcome.error}
        decided = _Decided([(sid, o.status) for sid, o in done], self.ready.next())
        for step_id in decided.actions.start:
            step = spec.step(step_id)
            try:
                _refuse_previews(step, self.ctx.parsed[step.id], self.previews)
                args, record = resolve_step_call(
                    self.ctx, step, inputs=self.run.inputs, step_value=self.views.get
                )
                args = checkpoint.with_progress(step, self.results[step_id], args, record)
            except FlowpilotError as exc:
                decided.failed.append((step_id, exc.as_dict()))
                continue
            decided.claims.append((step_id, args, record))
        return decided

    def _write_decisions(self, decided: _Decided, finished: list[RowWrite]) -> None:
        """The turn's outcomes and decisions, as one atomic unit (``rows_write``: one
        statement on PostgreSQL); the decisions are written only if every outcome was
        (and, in the first turn, the run's start)."""
        prepared = self._prepared
        if prepared is None:
            writes = list(finished)
            skipped = [self.results[sid] for sid in decided.actions.skip]
            if skipped:
                checkpoint.mark_skipped(skipped, self.ctx.now(), into=writes)
            skips = writes[len(finished) :]
            for step_id, error in decided.failed:
                checkpoint.mark_failed_before_call(
                    self.ctx, self.results[step_id], error, into=writes
                )
            claims: list[RowWrite] = []
            behind_start = self.start is not None
            for sid, _, record in decided.claims:
                checkpoint.mark_running(
                    self.ctx,
                    self.results[sid],
                    inputs_record=record,
                    into=claims,
                    behind_start=behind_start,
                )
            prepared = self._prepared = _Prepared(
                finished, skips, writes, claims, self.start, self._finish_write(decided)
            )
        else:
            writes, claims = prepared.writes, prepared.claims
            for write in prepared.skips:  # as ``mark_skipped`` marks them in memory
                write.apply()
        head = [prepared.start] if prepared.start is not None else []
        tail = [prepared.finish] if prepared.finish is not None else []
        counts = rows_write([*head, *writes, *claims, *tail], required=len(head) + len(finished))
        if head:
            if not counts[0]:
                self.run.refresh_from_db()
                raise RunNotStarted(f"run {self.run.pk} is {self.run.status}; it cannot start")
            self.start = None
            counts = counts[1:]
        lost = [sid for (sid, _), count in zip(decided.finished, counts, strict=False) if not count]
        if lost:
            names = ", ".join(f"`{sid}`" for sid in lost)
            raise RunStateError(
                f"run {self.run.pk}: the outcome of step {names} could not be recorded: "
                "another process changed the step while this one ran it"
            )
        decided.claimed = [bool(count) for count in counts[len(writes) : len(writes) + len(claims)]]
        if tail:
            decided.run_finished = bool(counts[-1])
        for (sid, _, _), claimed in zip(decided.claims, decided.claimed, strict=True):
            if not claimed:
                self.results[sid].refresh_from_db()

    def _finish_write(self, decided: _Decided) -> RowWrite | None:
        """The run's finish, when this turn leaves nothing to run and may write it (not
        the first turn, which starts the run; not a run recording its calls, stored before
        it is finished). None also when it cannot be prepared (its outputs do not
        resolve): ``run_finish`` after the turn then fails the run as it always has."""
        if not decided.actions.done or decided.claims or decided.failed:
            return None
        if decided.actions.waiting:  # the run waits for a person: ``run_wait`` decides
            return None
        if self.start is not None or self.ctx.taps is not None:
            return None
        try:
            return run_finish_write(self.ctx, self.run, self.views, self.results)
        except Exception:  # noqa: BLE001 - raised again by run_finish after the turn
            logger.debug("run %s: its finish is written after the last turn", self.run.pk)
            return None

    def after_commit(self, decided: _Decided, notify: Observer) -> list[tuple[str, dict[str, Any]]]:
        """Tell the observer what the turn did; the steps to call, with their arguments."""
        for step_id, status in decided.finished:
            _log_finished(self.run, self.results[step_id])
            notify(status, self.results[step_id])
        for step_id in decided.actions.skip:
            logger.debug(
                "run %s: step %s skipped", self.run.pk, step_id, extra={"step_id": step_id}
            )
            notify(StepStatus.SKIPPED, self.results[step_id])
        for step_id, _ in decided.failed:
            result = self.results[step_id]
            _log_finished(self.run, result)
            self.ready.settle(step_id, checkpoint.state_of(result, self.ctx.spec.step(step_id)))
            self.views[step_id] = checkpoint.view_of(result)
            notify(StepStatus.FAILED, result)
        started = []
        for (step_id, args, _), claimed in zip(decided.claims, decided.claimed, strict=True):
            result = self.results[step_id]
            if not claimed:
                # The run was cancelled meanwhile: the step does not start (nor retries here).
                pending = result.status == StepStatus.PENDING
                self.ready.settle(
                    step_id, StepState(StepStatus.SKIPPED if pending else result.status)
                )
                continue
            self.ready.settle(step_id, StepState(StepStatus.RUNNING))
            notify("started", result)
            logger.debug(
                "run %s: step %s started", self.run.pk, step_id, extra={"step_id": step_id}
            )
            started.append((step_id, args))
        return started


def _log_finished(run: Run, result: StepResult) -> None:
    """The debug line of a step's end: its status, duration and tries, and its error."""
    took = result.duration.total_seconds() * 1000 if result.duration is not None else 0.0
    error = result.error or {}
    logger.debug(
        "run %s: step %s %s in %.0f ms (%s tr%s)%s",
        run.pk,
        result.step_id,
        result.status,
        took,
        result.attempts,
        "y" if result.attempts == 1 else "ies",
        f": {error.get('type')}: {str(error.get('message', ''))[:300]}" if error else "",
        extra={"step_id": result.step_id},
    )


class CheckpointTruncated(FlowpilotError):
    code = "checkpoint_truncated"


def _refuse_previews(step: AnyStep, parsed: Mapping[str, Any], previews: frozenset[str]) -> None:
    """Fail clearly rather than pass null where a capped checkpoint preview stands."""
    for ref in iter_refs(dict(parsed)):
        if isinstance(ref, StepRef) and ref.step_id in previews:
            raise CheckpointTruncated(
                f"step `{step.id}` reads `{ref}`, but the output of `{ref.step_id}` was "
                "stored truncated (over FLOWPILOT_MAX_STORED_OUTPUT_BYTES), so this resumed "
                "run cannot read it; raise the limit and start a new run"
            )


CANCEL_CHECK_SECONDS = 0.2  # a cancel is seen within this long; not a query per step


class _Every:
    """True at most once per ``seconds`` (the first call is always due)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.last: float | None = None

    def due(self) -> bool:
        now = time.monotonic()
        if self.last is not None and now - self.last < self.seconds:
            return False
        self.last = now
        return True


def _cancelled(run: Run) -> bool:
    return Run.objects.filter(pk=run.pk, status=RunStatus.CANCELLED).exists()
