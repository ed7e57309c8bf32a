"""A regression guard that is not a timing: database queries per step, in process.

The in-process driver reads a run's checkpoint once, then writes a constant number of
statements per step (claim, outcome). A change that brings back O(N) work per step (a
read of every step per turn, a re-read of results) makes the per-step count grow with
the run, and these tests fail: the count for a 100-step chain must fit the same
``fixed + per_step * N`` line as the count for a 10-step one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import pytest
from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.test.utils import CaptureQueriesContext

from runs.engine import local
from runs.services import run_create, run_execute
from workflows.services import workflow_import

pytestmark = pytest.mark.django_db(transaction=True)

PER_STEP = 2  # the claim and the outcome (transaction control not counted)
TRANSACTION_CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")
FIXED = 10  # run start, tools' state, checkpoint read, one cancel check, finish, reads back


@pytest.fixture(autouse=True)
def checks_once_per_run(monkeypatch):
    """The driver looks for a cancel every 0.2 s and re-reads the breaker hosts every
    second: a count that depends on the clock would make this a timing (a slow machine
    would see more of them). Once per run here (the first of each is always made)."""
    monkeypatch.setattr(local, "CANCEL_CHECK_SECONDS", 3600.0)
    monkeypatch.setattr(local, "REFRESH_SECONDS", 3600.0)


def chain(n: int) -> dict:
    """``c000 → c001 → …``: each step is a transform reading its parent's value."""
    steps = [{"id": "c000", "kind": "transform", "expression": "{n: `1`}"}]
    steps += [
        {
            "id": f"c{i:03d}",
            "kind": "transform",
            "expression": "{n: n}",
            "input_mapping": {"n": f"c{i - 1:03d}.n"},
        }
        for i in range(1, n)
    ]
    return {"name": f"chain_{n}", "steps": steps}


def wide(n: int) -> dict:
    steps = [{"id": f"w{i:03d}", "kind": "transform", "expression": "{n: `1`}"} for i in range(n)]
    return {"name": f"wide_{n}", "steps": steps}


def statements(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if not _control(q["sql"])]


def _control(sql: str) -> bool:
    return sql.upper().startswith(TRANSACTION_CONTROL)


def executions_of(definition: dict) -> tuple[CaptureQueriesContext, CaptureQueriesContext]:
    """What creating a run and executing it sent, after one warm-up run."""
    workflow, _ = workflow_import(data=definition)
    run_execute(run=run_create(workflow=workflow, trigger="cli"))  # caches warm
    with CaptureQueriesContext(connection) as created:
        run = run_create(workflow=workflow, trigger="cli")
    with CaptureQueriesContext(connection) as executed:
        run = run_execute(run=run)
    assert run.status == "succeeded", run.error_summary
    return created, executed


def queries_of(definition: dict) -> tuple[int, int]:
    """(statements creating the run, statements executing it)."""
    created, executed = executions_of(definition)
    return len(statements(created)), len(statements(executed))


@pytest.mark.parametrize("shape", [chain, wide])
def test_queries_per_step_stay_constant_from_10_to_100_steps(shape):
    _, small = queries_of(shape(10))
    _, large = queries_of(shape(100))

    per_step = (large - small) / 90
    counts = f"10 steps: {small} queries, 100 steps: {large}"
    assert per_step <= PER_STEP, f"{per_step:.2f} queries per step ({counts})"
    assert small <= FIXED + PER_STEP * 10
    assert large <= FIXED + PER_STEP * 100


def test_one_transaction_per_step_in_a_chain():
    """A step's outcome and the claim of the step it frees commit together; the run's
    start goes with the first claim, its finish with the last outcome."""
    if connection.vendor != "sqlite":
        pytest.skip("only SQLite's driver shows its BEGIN statements")
    _, executed = executions_of(chain(100))

    transactions: list[list[str]] = []
    for query in executed.captured_queries:
        sql = query["sql"].upper()
        if sql.startswith("BEGIN"):
            transactions.append([])
        elif transactions and not _control(sql):
            transactions[-1].append(" ".join(sql.split()[:2]))
    run, step = 'UPDATE "RUNS_RUN"', 'UPDATE "RUNS_STEPRESULT"'
    assert transactions == [[run, step], *[[step, step]] * 99, [step, run]]


def test_one_statement_per_step_in_a_chain_on_postgresql():
    """On PostgreSQL a turn is one statement (a data-modifying CTE): its outcome and
    the claim it frees, atomic without BEGIN and COMMIT — one round trip per step. The
    first turn is also the run's start, the last its finish."""
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement turn is PostgreSQL's")
    _, executed = executions_of(chain(100))

    sent = [q["sql"] for q in executed.captured_queries]
    writes = [sql for sql in sent if _writes(sql)]
    assert [sql.split()[0] for sql in writes] == ["WITH"] * 101
    tables = [re.findall(r'UPDATE "(\w+)"', sql) for sql in writes]
    run, step = "runs_run", "runs_stepresult"
    assert tables == [[run, step], *[[step, step]] * 99, [step, run]]
    assert not [q for q in executed.captured_queries if _control(q["sql"])]


def test_creating_a_run_costs_the_same_queries_at_any_size():
    """Validation and the registry come from the per-process caches: creating a run
    is the tools' state, the run row and a bulk insert of its steps (SQLite splits a
    large one into batches of its variable limit)."""
    small, _ = queries_of(chain(10))
    large, _ = queries_of(chain(100))

    assert small <= 5
    assert large <= small + 1


# --- statements, round trips and commits of a whole run ----------------------------------

WRITE = re.compile(r"\s*(INSERT|UPDATE|DELETE|WITH\b.*\b(INSERT|UPDATE|DELETE)\b)", re.I | re.S)


@dataclass
class Sent:
    """What a piece of code sent to the database, on this thread's connection.

    ``statements`` leave transaction control out; ``round_trips`` count it in (a
    transaction's ``BEGIN``, which psycopg sends on its first statement, its ``COMMIT``,
    savepoints); ``commits`` are the transactions that wrote — on PostgreSQL each is a
    WAL flush (``synchronous_commit=on``), a statement that writes in autocommit
    included, a read alone not (it writes no WAL).
    """

    statements: list[str] = field(default_factory=list)
    round_trips: int = 0
    commits: int = 0
    in_transaction: bool = False
    wrote: bool = False

    def end_transaction(self, *, committed: bool) -> None:
        if self.in_transaction:
            self.round_trips += 1
            self.commits += committed and self.wrote
        self.in_transaction = self.wrote = False


def _writes(sql: str) -> bool:
    """An INSERT, UPDATE or DELETE, or a ``WITH`` holding one (a data-modifying CTE)."""
    return WRITE.match(sql) is not None


@contextmanager
def sent_by() -> Iterator[Sent]:
    """Count what the ``with`` block sends (``Sent``), through an execute wrapper and
    the connection's own commit and rollback."""
    sent = Sent()
    db = connections[DEFAULT_DB_ALIAS]
    real_commit, real_rollback = db.commit, db.rollback

    def wrapper(execute, sql, params, many, context):
        if not _control(sql):
            sent.statements.append(sql)
        if db.in_atomic_block:
            sent.round_trips += not sent.in_transaction  # its BEGIN
            sent.in_transaction = True
            sent.wrote = sent.wrote or _writes(sql)
        else:
            sent.commits += _writes(sql)  # autocommit: a write is its own commit
        sent.round_trips += not sql.upper().startswith("BEGIN")  # SQLite's is a statement
        return execute(sql, params, many, context)

    def commit() -> None:
        sent.end_transaction(committed=True)
        real_commit()

    def rollback() -> None:
        sent.end_transaction(committed=False)
        real_rollback()

    db.commit, db.rollback = commit, rollback  # instance attributes, removed after
    try:
        with db.execute_wrapper(wrapper):
            yield sent
    finally:
        del db.commit, db.rollback


def sent_by_a_run(definition: dict) -> Sent:
    """What ``run_create`` + ``run_execute`` of ``definition`` sent, after a warm-up run."""
    workflow, _ = workflow_import(data=definition)
    run_execute(run=run_create(workflow=workflow, trigger="cli"))  # caches warm
    with sent_by() as sent:
        run = run_execute(run=run_create(workflow=workflow, trigger="cli"))
    assert run.status == "succeeded", run.error_summary
    return sent


def test_a_one_step_run_commits_three_times():
    """Creating and executing a 1-step run: three commits — the run's rows, its start
    with the step's claim, the step's outcome with the run's finish — each a state a
    crash must find. On PostgreSQL each is one statement outside any transaction, and
    the run's only other statements are two reads (the tool table's state, the breaker
    hosts): five round trips in all."""
    sent = sent_by_a_run(chain(1))

    assert sent.commits == 3, sent.statements
    if connection.vendor == "postgresql":
        assert (len(sent.statements), sent.round_trips) == (5, 5), sent.statements


@pytest.mark.parametrize("n", [10, 100])
def test_a_chain_step_is_one_commit_and_on_postgresql_one_round_trip(n):
    """Each step of a chain adds one commit (its outcome with the next claim); on
    PostgreSQL that is one statement and one round trip. What a run costs besides its
    steps stays that of a 1-step run."""
    one, chained = sent_by_a_run(chain(1)), sent_by_a_run(chain(n))

    assert chained.commits - one.commits == n - 1
    if connection.vendor == "postgresql":
        assert len(chained.statements) - len(one.statements) == n - 1
        assert chained.round_trips - one.round_trips == n - 1
