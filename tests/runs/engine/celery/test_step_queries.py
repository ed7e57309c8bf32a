"""The database queries of one Celery step task do not grow with the run.

A regression guard that is not a timing: the step task's body (``step_execute``) is
called in process, as a worker calls it, on steps of chains of 10, 20 and 100 ``echo``
steps, and every SQL statement is counted. Both ways a step reaches a worker:

- **a task per step** (every step has a ``timeout``, so none can share a task): the
  task of a middle step runs the same number of queries whatever the chain's length;
- **a chain continued in its task**: one task runs the whole chain, and each hop adds
  the same number of queries, at most ``MAX_PER_HOP``, and commits once (the step's
  outcome, the run lock and the next step's claim in one transaction).

Beside the statements, every read of the step table must name its rows (by id or step
id, or a ``LIMIT``): a read of all the run's steps per step (O(steps) rows per hop, what
the advance did before it became incremental) fails here, on SQLite and PostgreSQL,
even though it is one statement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from runs.engine.celery import step as celery_step
from runs.engine.celery.run import run_start
from runs.models import Run
from runs.services import run_create
from tests.celery_support import Bus, import_flow

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def pauses_read_once(settings):
    """Adaptive pacing reads the paused keys once per ``FLOWPILOT_PACING_REFRESH`` seconds
    per process, whatever the run (docs/limits.md): a read by the clock, not by the step.
    An hour here, so the warm-up's read is the only one and the counts are per step."""
    settings.FLOWPILOT_PACING_REFRESH = 3600

# Statements, transaction control (BEGIN, COMMIT, savepoints) not counted. Of these,
# one per call is the circuit breaker's (a healthy host: one read, no write).
MAX_PER_HOP = 3  # breaker, outcome (locking the run), the next step's claim
# The claim (on PostgreSQL also the step's first read: one ``UPDATE … FROM … RETURNING``;
# elsewhere a read after it), reading its upstream output, breaker, outcome (locking
# the run, writing the inputs), queueing the next step.
MAX_PER_TASK = {"postgresql": 5}
MAX_PER_TASK_ELSEWHERE = 6
CONTROL = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE SAVEPOINT")
WRITES = ("INSERT", "UPDATE", "DELETE")


def chain(n: int, **step: object) -> dict:
    ids = [f"s{i:04d}" for i in range(n)]
    steps = [
        {
            "id": sid,
            "kind": "tool",
            "tool": "echo",
            "input_mapping": {
                "tag": "$input.tag" if i == 0 else f"{ids[i - 1]}.tag",
                "name": f"n{i}",
                "delay": 0,
            },
            **step,
        }
        for i, sid in enumerate(ids)
    ]
    suffix = "_timed" if step else ""
    return {"name": f"chain_{n}{suffix}", "inputs": {"tag": {"type": "string"}}, "steps": steps}


def wide(n: int) -> dict:
    steps = [
        {"id": f"w{i:04d}", "kind": "tool", "tool": "echo",
         "input_mapping": {"tag": "$input.tag", "name": f"n{i}", "delay": 0}}
        for i in range(n)
    ]  # fmt: skip
    return {"name": f"wide_{n}", "inputs": {"tag": {"type": "string"}}, "steps": steps}


def start(workflow) -> tuple[Run, Bus]:
    bus = Bus()
    run = run_create(workflow=workflow, trigger="api", inputs={"tag": "q"})
    run_start(run=run, publish=bus)
    return run, bus


@dataclass
class Counted:
    statements: int  # transaction control not counted
    whole_run: int  # reads of the run's step rows bounded by nothing but the run
    commits: int  # transactions that wrote: COMMITs, and writes outside any transaction


# A statement on the step table is bounded when it names the rows it touches.
BOUNDED = re.compile(r'"runs_stepresult"\."(id|step_id)" (=|IN)|\bid = %s|\bLIMIT \d+', re.I)


def count(step_result_id: int, bus: Bus) -> Counted:
    with CaptureQueriesContext(connection) as queries:
        celery_step.step_execute(step_result_id=step_result_id, worker="q@local", publish=bus)
    captured = [q["sql"] for q in queries.captured_queries]
    sqls = [sql for sql in captured if not sql.upper().startswith(CONTROL)]
    whole = [sql for sql in sqls if 'FROM "runs_stepresult"' in sql and not BOUNDED.search(sql)]
    return Counted(len(sqls), len(whole), commits(captured))


def commits(captured: list[str]) -> int:
    """Each a round trip that flushes the log: a COMMIT, or a write in autocommit."""
    count, depth = 0, 0
    for sql in (s.upper() for s in captured):
        if sql.startswith("BEGIN"):
            depth += 1
        elif sql.startswith(("COMMIT", "ROLLBACK")):
            count += sql.startswith("COMMIT")
            depth = 0
        elif depth == 0 and sql.startswith(WRITES):
            count += 1
    return count


def one_task_of_the_middle_step(n: int) -> Counted:
    """Queries of the task of step n/2 of an n-step chain where every step is a task."""
    run, bus = start(import_flow(chain(n, timeout=30)))
    for _ in range(n // 2):
        bus.drain(limit=1)
    message = bus.messages.pop(0)
    queries = count(message.step_result_id, bus)
    assert len(bus.messages) == 1  # it published the next step instead of running it
    bus.drain()
    run.refresh_from_db()
    assert run.status == "succeeded"
    return queries


def whole_chain_in_one_task(n: int) -> Counted:
    """Queries of the first step's task, which runs the whole n-step chain."""
    workflow = import_flow(chain(n))
    start(workflow)[1].drain()  # warm this process's caches for the definition
    run, bus = start(workflow)
    queries = count(bus.messages.pop(0).step_result_id, bus)
    assert bus.messages == []
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert run.outputs is not None
    return queries


def test_a_step_task_runs_the_same_queries_in_a_chain_of_10_and_of_100(echo_api):
    short, long = one_task_of_the_middle_step(10), one_task_of_the_middle_step(100)

    assert short.statements == long.statements
    assert long.statements <= MAX_PER_TASK.get(connection.vendor, MAX_PER_TASK_ELSEWHERE)
    assert short.commits == long.commits == 2  # the claim; the outcome and the next step
    assert long.whole_run == 0  # no read of every step of the run


def test_each_hop_of_a_chain_continued_in_its_task_adds_the_same_few_queries(echo_api):
    c10, c20, c100 = (whole_chain_in_one_task(n) for n in (10, 20, 100))

    per_hop = (c20.statements - c10.statements) / 10
    assert per_hop == int(per_hop)
    assert c100.statements == c10.statements + 90 * per_hop
    assert per_hop <= MAX_PER_HOP
    assert c20.commits - c10.commits == 10  # one commit per hop
    assert c100.commits == c10.commits + 90
    # Reads of the whole run happen once per run (finishing it), never once per hop.
    assert c10.whole_run == c20.whole_run == c100.whole_run <= 2


# A leaf of a wide graph (no dependants): the claim (on PostgreSQL also its first read),
# breaker, outcome (locking the run, writing the inputs), the check for a step still in
# flight (the run is finished by the last one).
MAX_PER_LEAF = {"postgresql": 4}
MAX_PER_LEAF_ELSEWHERE = 5


def one_leaf_of_a_wide_graph(n: int) -> Counted:
    run, bus = start(import_flow(wide(n)))
    assert len(bus.messages) == n  # every step is a task of its own
    bus.drain(limit=n // 2)
    queries = count(bus.messages.pop(0).step_result_id, bus)
    bus.drain()
    run.refresh_from_db()
    assert run.status == "succeeded"
    return queries


def test_a_leaf_task_of_a_wide_graph_runs_the_same_few_queries_at_10_and_30(echo_api):
    narrow, broad = one_leaf_of_a_wide_graph(10), one_leaf_of_a_wide_graph(30)

    assert narrow.statements == broad.statements
    assert broad.statements <= MAX_PER_LEAF.get(connection.vendor, MAX_PER_LEAF_ELSEWHERE)
    assert narrow.commits == broad.commits == 2  # the claim; the outcome
    assert broad.whole_run == 0
