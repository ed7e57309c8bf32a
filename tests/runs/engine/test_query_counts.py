"""A regression guard that is not a timing: database queries per step, in process.

The in-process driver reads a run's checkpoint once, then writes a constant number of
statements per step (claim, outcome). A change that brings back O(N) work per step (a
read of every step per turn, a re-read of results) makes the per-step count grow with
the run, and these tests fail: the count for a 100-step chain must fit the same
``fixed + per_step * N`` line as the count for a 10-step one.
"""

from __future__ import annotations

import pytest
from django.db import connection
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
    """A step's outcome and the claim of the step it frees commit together."""
    if connection.vendor != "sqlite":
        pytest.skip("only SQLite's driver shows its BEGIN statements")
    _, executed = executions_of(chain(100))

    transactions: list[list[str]] = []
    for query in executed.captured_queries:
        sql = query["sql"].upper()
        if sql.startswith("BEGIN"):
            transactions.append([])
        elif transactions and not _control(sql):
            transactions[-1].append(sql.split()[0])
    # Each turn but the first and the last writes an outcome and the next claim; the
    # first (c000's claim) and the last (c099's outcome) are one statement each, atomic
    # without a transaction of their own (the driver's COMMIT is not a logged statement:
    # the last transaction's list runs on into them and the run's finish).
    assert len(transactions) == 99
    assert transactions[:98] == [["UPDATE", "UPDATE"]] * 98
    assert transactions[98] == ["UPDATE"] * 4


def test_one_statement_per_step_in_a_chain_on_postgresql():
    """On PostgreSQL a turn is one statement (a data-modifying CTE): its outcome and
    the claim it frees, atomic without BEGIN and COMMIT — one round trip per step."""
    if connection.vendor != "postgresql":
        pytest.skip("the one-statement turn is PostgreSQL's")
    _, executed = executions_of(chain(100))

    sent = [q["sql"] for q in executed.captured_queries]
    writes = [sql for sql in sent if '"runs_stepresult"' in sql.split("SET")[0]]
    # The first turn (c000's claim) and the last (c099's outcome) are one UPDATE each.
    assert [sql.split()[0] for sql in writes] == ["UPDATE", *["WITH"] * 99, "UPDATE"]
    assert all(sql.count("UPDATE ") == 2 for sql in writes[1:-1])
    assert not [q for q in executed.captured_queries if _control(q["sql"])]


def test_creating_a_run_costs_the_same_queries_at_any_size():
    """Validation and the registry come from the per-process caches: creating a run
    is the tools' state, the run row and a bulk insert of its steps (SQLite splits a
    large one into batches of its variable limit)."""
    small, _ = queries_of(chain(10))
    large, _ = queries_of(chain(100))

    assert small <= 5
    assert large <= small + 1
