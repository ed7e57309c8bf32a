"""Concurrency limits (``runs.concurrency``): admission, the queue, promotion, the sweep.

In process (no broker): a run's end executes the next queued runs of its pool in the
same process, first in first out. The limit is counted in the database under the
pool's lock; the race between processes is tested on PostgreSQL with threads, each its
own connection, and on real Celery workers in ``test_celery_concurrency``.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from runs import concurrency
from runs.models import Run
from runs.services import run_cancel, run_create, run_enqueue, run_execute, run_prepare_resume
from runs.state import RunStatus
from tests.conftest import statuses
from workflows.schema_concurrency import Concurrency
from workflows.services import workflow_import, workflow_spec

pytestmark = pytest.mark.django_db(transaction=True)


def limited_flow(name: str = "limited", **limit: Any) -> dict:
    """One transform step reading ``$input.account``, under ``limit``."""
    return {
        "name": name,
        "inputs": {"account": {"type": "string"}, "n": {"type": "integer", "default": 0}},
        "steps": [
            {
                "id": "echo",
                "kind": "transform",
                "expression": "{account: account, n: n}",
                "input_mapping": {"account": "$input.account", "n": "$input.n"},
            }
        ],
        "concurrency": {"max_runs": 2, "key": "$input.account", **limit},
    }


def make(data: dict):
    workflow, _ = workflow_import(data=data, status="active")
    return workflow


def create(workflow, account: str, n: int = 0) -> Run:
    return run_create(workflow=workflow, trigger="api", inputs={"account": account, "n": n})


# --- keys ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "key"),
    [("acme", "acme"), (7, "7"), (None, "null"), ({"b": 1, "a": 2}, '{"a": 2, "b": 1}')],
)
def test_the_key_is_the_inputs_value_as_text(value, key):
    limit = Concurrency(max_runs=1, key="$input.account")

    assert concurrency.key_value(limit, {"account": value}) == key


def test_a_long_key_value_is_stored_as_its_digest_and_no_key_is_one_pool():
    limit = Concurrency(max_runs=1, key="$input.account")

    long_key = concurrency.key_value(limit, {"account": "x" * 300})

    assert long_key.startswith("sha256:")
    assert len(long_key) == 71
    assert concurrency.key_value(Concurrency(max_runs=1), {"account": "acme"}) == ""


def test_validation_replay_and_child_runs_are_not_limited():
    spec = workflow_spec(make(limited_flow()))
    for trigger in ("validation", "replay", "workflow"):
        assert concurrency.limited_key(spec, {"account": "a"}, trigger) is None
    assert concurrency.limited_key(spec, {"account": "a"}, "webhook") == "a"


# --- admission -------------------------------------------------------------------------


def test_runs_past_the_limit_queue_per_key_and_a_run_without_a_limit_has_no_key():
    workflow = make(limited_flow())
    unlimited = make({**limited_flow("free"), "concurrency": None})

    first, second, third = (create(workflow, "acme") for _ in range(3))
    other = create(workflow, "globex")

    assert [r.status for r in (first, second, third)] == ["pending", "pending", "queued"]
    assert (other.status, other.concurrency_key) == ("pending", "globex")
    assert third.concurrency_key == "acme"
    assert statuses(third) == {"echo": "pending"}
    assert create(unlimited, "acme").concurrency_key is None


def test_a_queued_run_is_not_started_by_enqueue_and_starts_when_a_slot_frees_fifo():
    workflow = make(limited_flow(max_runs=1))
    holder = create(workflow, "acme", 0)
    waiting = [create(workflow, "acme", n) for n in (1, 2, 3)]

    assert run_enqueue(run=waiting[0]).status == "queued"
    assert Run.objects.get(pk=waiting[0].pk).status == "queued"

    run_execute(run=holder)  # its end executes the queue here, oldest first

    runs = [Run.objects.get(pk=r.pk) for r in (holder, *waiting)]
    assert [r.status for r in runs] == ["succeeded"] * 4
    starts = [r.started_at for r in runs]
    assert starts == sorted(starts)
    assert [r.outputs["echo"]["n"] for r in runs] == [0, 1, 2, 3]


def test_on_limit_skip_records_a_skipped_run_with_the_reason():
    workflow = make(limited_flow(max_runs=1, on_limit="skip"))
    create(workflow, "acme")

    skipped = run_enqueue(run=create(workflow, "acme"))

    skipped.refresh_from_db()
    assert skipped.status == "skipped"
    assert skipped.finished_at is not None
    assert skipped.error_summary == (
        "skipped: concurrency limit reached: workflow `limited` allows at most 1 run at once "
        "for account 'acme' (concurrency.max_runs), and 1 is pending or running"
    )
    assert statuses(skipped) == {"echo": "skipped"}


def test_on_limit_fail_records_a_failed_run_naming_the_limit_and_the_key():
    workflow = make(limited_flow(max_runs=2, on_limit="fail"))
    create(workflow, "acme")
    create(workflow, "acme")

    failed = run_enqueue(run=create(workflow, "acme"))

    failed.refresh_from_db()
    assert failed.status == "failed"
    assert "allows at most 2 runs at once for account 'acme'" in failed.error_summary
    assert "and 2 are pending or running" in failed.error_summary


def test_a_slot_is_free_again_once_its_run_ended():
    workflow = make(limited_flow(max_runs=1, on_limit="fail"))
    run_execute(run=create(workflow, "acme"))

    assert create(workflow, "acme").status == "pending"


# --- cancel, resume ---------------------------------------------------------------------


def test_cancelling_a_queued_run_takes_it_out_of_the_queue():
    workflow = make(limited_flow(max_runs=1))
    holder = create(workflow, "acme")
    queued = create(workflow, "acme")
    after = create(workflow, "acme")

    assert run_cancel(run=queued) is True
    queued.refresh_from_db()
    assert queued.status == "cancelled"
    assert statuses(queued) == {"echo": "skipped"}

    run_execute(run=holder)
    after.refresh_from_db()
    assert after.status == "succeeded"
    queued.refresh_from_db()
    assert queued.status == "cancelled"


def test_cancelling_a_pending_run_gives_its_slot_to_the_next_queued_run():
    workflow = make(limited_flow(max_runs=1))
    holder = create(workflow, "acme")
    queued = create(workflow, "acme")

    run_cancel(run=holder)

    queued.refresh_from_db()
    assert queued.status == "succeeded"  # executed here: no broker


def test_a_resumed_run_goes_back_to_the_queue_when_its_pool_is_full():
    workflow = make(limited_flow(max_runs=1))
    first = create(workflow, "acme")
    run_cancel(run=first)  # no queued run: the slot is simply free
    holder = create(workflow, "acme")

    resumed = run_prepare_resume(run=first)

    assert resumed.status == "queued"
    run_execute(run=holder)
    resumed.refresh_from_db()
    assert resumed.status == "succeeded"


# --- the sweep and the page's facts ----------------------------------------------------


def test_the_sweep_promotes_queued_runs_whose_slot_is_free():
    workflow = make(limited_flow(max_runs=1))
    holder = create(workflow, "acme")
    queued = create(workflow, "acme")
    # The holder ends without its pool being filled (a lost fill message).
    Run.objects.filter(pk=holder.pk).update(status=RunStatus.FAILED)
    started: list[int] = []

    promoted = concurrency.queued_sweep(start=lambda run: started.append(run.pk))

    assert [r.pk for r in promoted] == started == [queued.pk]
    assert Run.objects.get(pk=queued.pk).status == "pending"
    assert concurrency.queued_sweep(start=lambda run: started.append(run.pk)) == []


def test_a_run_that_cannot_start_after_waiting_is_failed_and_the_next_one_starts():
    workflow = make(limited_flow(max_runs=1))
    holder = create(workflow, "acme")
    broken, good = create(workflow, "acme"), create(workflow, "acme")
    Run.objects.filter(pk=holder.pk).update(status=RunStatus.SUCCEEDED)

    def start(run: Run) -> None:
        if run.pk == broken.pk:
            raise RuntimeError("the version is no longer valid")

    promoted = concurrency.slots_fill(workflow_name="limited", key="acme", start=start)

    assert [r.pk for r in promoted] == [good.pk]
    broken.refresh_from_db()
    assert broken.status == "failed"
    assert "could not start after waiting for a concurrency slot" in broken.error_summary


def test_waiting_behind_names_the_slot_holders_and_the_position():
    workflow = make(limited_flow(max_runs=2))
    holders = [create(workflow, "acme") for _ in range(2)]
    first, second = create(workflow, "acme"), create(workflow, "acme")

    waiting = concurrency.waiting_behind(second)

    assert waiting is not None
    assert [r.pk for r in waiting.holding] == [r.pk for r in holders]
    assert (waiting.position, waiting.queued_total, waiting.key) == (2, 2, "acme")
    assert waiting.description.startswith("at most 2 runs at once per `account`")
    assert concurrency.waiting_behind(holders[0]) is None
    assert concurrency.waiting_behind(first).position == 1


def test_pool_lock_needs_a_transaction():
    with pytest.raises(RuntimeError, match="needs a transaction"):
        concurrency.pool_lock("limited", "acme")


# --- the race: PostgreSQL, one connection per thread ----------------------------------


@pytest.mark.postgres
def test_concurrent_admissions_never_exceed_the_limit():
    if connection.vendor != "postgresql":
        pytest.skip("the race between connections is PostgreSQL's")
    workflow = make(limited_flow(max_runs=3))
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def admit_some() -> None:
        try:
            barrier.wait()
            for _ in range(5):
                create(workflow, "acme")
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=admit_some) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    counts = {
        s: Run.objects.filter(workflow__name="limited", status=s).count()
        for s in ("pending", "queued")
    }
    assert counts == {"pending": 3, "queued": 37}


# --- the surfaces: run page, admin list, REST API, showrun ----------------------------


def test_the_run_page_says_what_a_queued_run_waits_behind(admin_client):
    workflow = make(limited_flow(max_runs=2))
    holders = [create(workflow, "acme") for _ in range(2)]
    create(workflow, "acme")
    queued = create(workflow, "acme")

    page = admin_client.get(f"/admin/runs/run/{queued.pk}/change/").content.decode()

    assert 'id="fp-run-waiting" data-position="2"' in page
    assert "at most 2 runs at once per `account`" in page
    assert "key <code>account</code> = <code>acme</code>" in page
    assert "number 2 of 2 in the queue" in page
    for holder in holders:
        assert f'<a href="/admin/runs/run/{holder.pk}/change/">run {holder.pk}</a>' in page
    status = admin_client.get(f"/admin/runs/run/{queued.pk}/status.json").json()
    assert status["status"] == "queued"
    assert status["waiting"]["position"] == 2
    assert [h["id"] for h in status["waiting"]["holding"]] == [h.pk for h in holders]
    holder_page = admin_client.get(f"/admin/runs/run/{holders[0].pk}/change/").content.decode()
    assert "fp-run-waiting" not in holder_page


def test_the_admin_list_shows_and_filters_queued_and_skipped_runs(admin_client):
    workflow = make(limited_flow(max_runs=1))
    create(workflow, "acme")
    queued = create(workflow, "acme")
    skipper = make(limited_flow("skipper", max_runs=1, on_limit="skip"))
    create(skipper, "acme")
    skipped = create(skipper, "acme")

    listed = admin_client.get("/admin/runs/run/?status__exact=queued")
    page = listed.content.decode()

    assert listed.status_code == 200
    assert [r.pk for r in listed.context["cl"].result_list] == [queued.pk]
    assert "Queued (concurrency limit)" in page
    others = admin_client.get("/admin/runs/run/?status__exact=skipped").context["cl"]
    assert [r.pk for r in others.result_list] == [skipped.pk]


def test_the_api_shows_queued_runs_filters_them_and_cancels_one():
    from rest_framework.test import APIClient

    from tests.factories import UserFactory

    client = APIClient()
    client.force_authenticate(user=UserFactory(username="root", superuser=True))
    workflow = make(limited_flow(max_runs=1))
    holder = create(workflow, "acme")

    created = client.post(
        "/api/v1/runs/",
        {"workflow": "limited", "inputs": {"account": "acme"}},
        format="json",
    )

    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["status"] == "queued"
    listed = client.get("/api/v1/runs/", {"status": "queued"}).json()
    assert [r["id"] for r in listed["results"]] == [body["id"]]
    cancelled = client.post(f"/api/v1/runs/{body['id']}/cancel/")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    assert Run.objects.get(pk=holder.pk).status == "pending"


def test_showrun_json_says_what_a_queued_run_waits_behind(cli):
    import json

    workflow = make(limited_flow(max_runs=1, key=None))
    holder = create(workflow, "acme")
    queued = create(workflow, "globex")  # no key: one pool for the workflow

    result = cli("showrun", str(queued.pk), "--json")

    record = json.loads(result.out)
    assert record["status"] == "queued"
    assert record["waiting"] == {
        "limit": "at most 1 run at once; further runs queue and start, oldest first, as slots free",
        "max_runs": 1,
        "key": None,
        "position": 1,
        "queued": 1,
        "holding": [{"id": holder.pk, "status": "pending"}],
    }


def test_runflow_reports_a_queued_run_and_exits_zero(cli, tmp_path):
    import yaml

    workflow = make(limited_flow(max_runs=1))
    create(workflow, "acme")
    path = tmp_path / "limited.yaml"
    path.write_text(yaml.safe_dump(limited_flow(max_runs=1)), encoding="utf-8")

    result = cli("runflow", str(path), "--input", "account=acme")

    assert result.code == 0, result.err
    queued = Run.objects.order_by("-pk").first()
    assert queued.status == "queued"
    assert f"run {queued.pk} queued: its workflow's concurrency limit has no free slot" in (
        result.out
    )


def test_enqueueing_a_queued_run_fills_a_slot_a_lost_fill_left_free():
    workflow = make(limited_flow(max_runs=1))
    holder = create(workflow, "acme")
    queued = create(workflow, "acme")
    Run.objects.filter(pk=holder.pk).update(status=RunStatus.FAILED)  # ended, pool not filled
    late = create(workflow, "acme")  # queues behind the waiting run: first in, first out

    assert late.status == "queued"
    done = run_enqueue(run=late)  # fills the pool: both run here, oldest first

    assert done.status == "succeeded"
    queued.refresh_from_db()
    assert queued.status == "succeeded"
    assert queued.started_at < done.started_at


# --- on Celery: the hook and the tasks (the workers themselves: test_celery_concurrency) --


def test_a_limited_runs_end_queues_a_fill_on_celery_and_an_unlimited_one_reads_nothing(
    monkeypatch, django_assert_num_queries
):
    from runs import hooks

    sent: list[tuple[str, list[int]]] = []
    monkeypatch.setattr(hooks.broker, "in_process", lambda: False)
    monkeypatch.setattr(
        hooks.current_app, "send_task", lambda name, args: sent.append((name, args))
    )

    with django_assert_num_queries(0):
        hooks.run_finished(run_id=7, child=False, limited=True)
        hooks.run_finished(run_id=8, child=False, limited=False)

    assert sent == [("runs.fill_slots", [7])]


def test_the_hook_reads_whether_a_run_is_limited_when_not_told():
    from runs import hooks

    workflow = make(limited_flow())
    run = create(workflow, "acme")
    sent: list[tuple[str, list[int]]] = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hooks.broker, "in_process", lambda: False)
        patch.setattr(hooks.current_app, "send_task", lambda name, args: sent.append((name, args)))
        hooks.run_finished(run_id=run.pk, child=False)

    assert sent == [("runs.fill_slots", [run.pk])]


def test_the_fill_and_sweep_tasks_start_the_promoted_runs_on_the_workers(monkeypatch):
    from runs import tasks

    workflow = make(limited_flow(max_runs=1))
    holder = create(workflow, "acme")
    first, second = create(workflow, "acme"), create(workflow, "globex")
    started: list[int] = []
    monkeypatch.setattr(concurrency, "start_on_workers", lambda run: started.append(run.pk))
    Run.objects.filter(pk=holder.pk).update(status=RunStatus.SUCCEEDED)

    tasks.fill_slots(holder.pk)
    tasks.fill_slots(10**9)  # a run deleted meanwhile: nothing to do

    assert started == [first.pk]
    assert second.status == "pending"  # its own pool had a free slot at once
    assert tasks.sweep_queued_runs() == 0


def test_runflow_reports_a_skipped_run_with_the_reason_and_exits_one(cli, tmp_path):
    import yaml

    data = limited_flow(max_runs=1, on_limit="skip")
    make(data)
    path = tmp_path / "limited.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    holder = create(make(data), "acme")

    result = cli("runflow", str(path), "--input", "account=acme")

    assert result.code == 1
    skipped = Run.objects.exclude(pk=holder.pk).get()
    assert skipped.status == "skipped"
    assert f"run {skipped.pk} skipped" in result.out
    assert "error: skipped: concurrency limit reached" in result.out
