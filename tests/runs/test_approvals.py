"""runs.approvals: an approval step waits for people, in process (no broker): who may
decide, the values against the form, N approvals or one rejection, the author refused,
timeouts, cancel, resume and restart asking again, a decision while the run still
runs, and a replay answering from the recorded decision."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from runs.approvals import (
    ApprovalDecided,
    ApprovalInvalid,
    ApprovalRefused,
    approval_decide,
    approvals_expire,
    approvals_pending_for,
)
from runs.models import ApprovalDecision, ApprovalRequest, ApprovalStatus, Run, StepResult
from runs.restart import run_restart
from runs.services import run_cancel, run_create, run_execute, run_resume
from tests.factories import UserFactory
from tests.runs.approval_support import TOKEN, activate, refund_flow, refunds_api

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(monkeypatch):
    monkeypatch.setenv("REFUNDS_TOKEN", TOKEN)
    fake = refunds_api()
    yield fake
    fake.stop()


@pytest.fixture
def people():
    finance = Group.objects.create(name="finance")
    carol = UserFactory(username="carol")
    carol.groups.add(finance)
    return {
        "alice": UserFactory(username="alice"),
        "bob": UserFactory(username="bob"),
        "carol": carol,
        "mallory": UserFactory(username="mallory"),
    }


def waiting_run(started_by=None, **approval) -> Run:
    workflow = activate(refund_flow(**approval))
    run = run_create(workflow=workflow, trigger="api", inputs={}, started_by=started_by)
    return run_execute(run=run)


def request_of(run: Run) -> ApprovalRequest:
    return ApprovalRequest.objects.get(run=run, status=ApprovalStatus.PENDING)


def steps(run: Run) -> dict[str, str]:
    return dict(StepResult.objects.filter(run=run).values_list("step_id", "status"))


def test_the_run_waits_holding_nothing_and_goes_on_with_the_values_once_approved(api, people):
    run = waiting_run()
    assert run.status == "waiting"
    assert steps(run) == {"count": "succeeded", "confirm": "waiting", "refund": "pending"}
    assert api.requests("refunds") == []
    request = request_of(run)
    assert (request.required, request.approvers) == (1, ["alice", "bob", "group:finance"])

    approval_decide(
        request_id=request.pk, user=people["alice"], approve=True,
        values={"note": "refund the March batch", "priority": "high"}, via="api",
    )  # fmt: skip

    run.refresh_from_db()
    assert run.status == "succeeded", run.error_summary
    (sent,) = api.requests("refunds")
    assert sent.json() == {"amount": 30, "note": "refund the March batch"}
    confirm = StepResult.objects.get(run=run, step_id="confirm")
    assert confirm.output == {"note": "refund the March batch", "priority": "high"}
    request.refresh_from_db()
    assert (request.status, request.output["priority"]) == ("approved", "high")
    (decision,) = request.decisions.all()
    assert (decision.username, decision.via, decision.preview_hash) == (
        "alice", "api", request.preview_hash,
    )  # fmt: skip


def test_the_preview_shows_the_exact_request_the_next_step_will_send_masked(api, people):
    request = request_of(waiting_run())
    (entry,) = request.preview
    assert (entry["step"], entry["tool"], entry["method"]) == ("refund", "send_refund", "POST")
    assert entry["url"] == f"{api.url}/refunds"
    assert entry["body"] == {"amount": 30, "note": None}  # the note comes from the approval
    assert entry["unknown"] == ["confirm.note"]
    assert TOKEN not in str(entry)
    headers = {k.lower(): v for k, v in entry["headers"].items()}
    assert headers["authorization"] != f"Bearer {TOKEN}", headers
    assert len(request.preview_hash) == 64
    assert api.requests("refunds") == []  # previewing sends nothing


def test_a_second_approver_is_needed_when_the_step_requires_two(api, people):
    run = waiting_run(required=2)
    request = request_of(run)
    approval_decide(request_id=request.pk, user=people["alice"], approve=True,
                    values={"note": "one"}, via="api")  # fmt: skip
    run.refresh_from_db()
    assert run.status == "waiting"
    with pytest.raises(ApprovalRefused, match="alice has decided this request already"):
        approval_decide(request_id=request.pk, user=people["alice"], approve=True,
                        values={"note": "again"}, via="api")  # fmt: skip
    approval_decide(
        request_id=request.pk,
        user=people["carol"],
        approve=True,
        values={"note": "two"},
        via="admin",
    )  # fmt: skip  (a group member)
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert StepResult.objects.get(run=run, step_id="confirm").output == {"note": "two"}


def test_only_approvers_decide_and_the_author_is_refused_when_configured(api, people):
    run = waiting_run(started_by=people["alice"], author_may_approve=False)
    request = request_of(run)
    assert request.author == people["alice"]
    with pytest.raises(ApprovalRefused, match="alice started this run"):
        approval_decide(request_id=request.pk, user=people["alice"], approve=True,
                        values={"note": "mine"}, via="api")  # fmt: skip
    with pytest.raises(ApprovalRefused, match="mallory is not among the approvers"):
        approval_decide(request_id=request.pk, user=people["mallory"], approve=True,
                        values={"note": "x"}, via="api")  # fmt: skip
    assert approvals_pending_for(people["alice"]) == []
    assert approvals_pending_for(people["bob"]) == [request]
    assert approvals_pending_for(people["carol"]) == [request]
    assert ApprovalDecision.objects.count() == 0


def test_a_step_naming_nobody_is_decided_by_holders_of_the_permission(api, people):
    request = request_of(waiting_run(approvers=[]))
    with pytest.raises(ApprovalRefused, match=r"runs\.approve_run"):
        approval_decide(request_id=request.pk, user=people["bob"], approve=True,
                        values={"note": "x"}, via="api")  # fmt: skip
    boss = UserFactory(username="boss", superuser=True)
    approval_decide(request_id=request.pk, user=boss, approve=True, values={"note": "x"},
                    via="api")  # fmt: skip
    assert Run.objects.get(pk=request.run_id).status == "succeeded"


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ({}, "'note' is a required property"),
        ({"note": "x", "priority": "urgent"}, "priority: 'urgent' is not one of"),
        ({"note": 5}, "note: 5 is not of type 'string'"),
    ],
)
def test_values_that_do_not_fit_the_form_are_refused_and_nothing_is_recorded(
    api, people, values, says
):
    request = request_of(waiting_run())
    with pytest.raises(ApprovalInvalid, match=says):
        approval_decide(request_id=request.pk, user=people["bob"], approve=True, values=values,
                        via="api")  # fmt: skip
    assert (request.decisions.count(), request_of(Run.objects.get()).status) == (0, "pending")


def test_a_preview_other_than_the_requests_is_refused(api, people):
    request = request_of(waiting_run())
    with pytest.raises(ApprovalInvalid, match="the preview you saw is not this request's"):
        approval_decide(request_id=request.pk, user=people["bob"], approve=True,
                        values={"note": "x"}, preview_hash="0" * 64, via="api")  # fmt: skip


def test_a_rejection_fails_the_step_and_the_run_and_a_resume_asks_again(api, people):
    run = waiting_run()
    request = request_of(run)
    approval_decide(request_id=request.pk, user=people["bob"], approve=False,
                    comment="the amounts look doubled", via="api")  # fmt: skip
    run.refresh_from_db()
    assert run.status == "failed"
    assert "rejected by bob: the amounts look doubled" in run.error_summary
    assert api.requests("refunds") == []
    with pytest.raises(ApprovalDecided, match="rejected already"):
        approval_decide(request_id=request.pk, user=people["alice"], approve=True,
                        values={"note": "x"}, via="api")  # fmt: skip

    run = run_resume(run=run)
    assert run.status == "waiting"
    again = request_of(run)
    assert again.pk != request.pk
    assert again.decisions.count() == 0


def test_a_rejection_under_on_error_continue_lets_the_run_go_on(api, people):
    run = waiting_run(on_error="continue")
    approval_decide(request_id=request_of(run).pk, user=people["bob"], approve=False, via="api")
    run.refresh_from_db()
    assert run.status == "succeeded"
    assert steps(run)["confirm"] == "failed"


@pytest.mark.parametrize(
    ("on_timeout", "run_status", "confirm", "refund"),
    [
        ("fail", "failed", "failed", "skipped"),
        ("skip", "succeeded", "skipped", "skipped"),
        ("continue", "succeeded", "succeeded", "succeeded"),
    ],
)
def test_a_request_whose_time_is_up_is_decided_as_on_timeout_says(
    api, people, on_timeout, run_status, confirm, refund
):
    run = waiting_run(timeout=3600, on_timeout=on_timeout)
    request = request_of(run)
    assert request.expires_at is not None
    assert approvals_expire(now=timezone.now()) == 0  # not yet
    assert approvals_expire(now=request.expires_at + timedelta(seconds=1)) == 1
    run.refresh_from_db()
    request.refresh_from_db()
    assert (run.status, request.status) == (run_status, "timed_out")
    assert steps(run)["confirm"] == confirm
    assert steps(run)["refund"] == refund
    if on_timeout == "continue":  # the form's defaults are the step's output
        assert api.requests("refunds")[0].json() == {"amount": 30, "note": "as planned"}
    if on_timeout == "fail":
        assert "no decision within" in run.error_summary


def test_cancelling_a_waiting_run_cancels_its_request(api, people):
    run = waiting_run()
    assert run_cancel(run=run)
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert steps(run)["confirm"] == "skipped"
    assert ApprovalRequest.objects.get().status == "cancelled"
    with pytest.raises(ApprovalDecided):
        approval_decide(request_id=ApprovalRequest.objects.get().pk, user=people["bob"],
                        approve=True, values={"note": "x"}, via="api")  # fmt: skip


def test_a_restart_from_before_the_approval_asks_again_and_one_after_reuses_it(api, people):
    run = waiting_run()
    approval_decide(request_id=request_of(run).pk, user=people["bob"], approve=True,
                    values={"note": "first"}, via="api")  # fmt: skip
    after = run_restart(
        run=Run.objects.get(pk=run.pk), from_step="refund", confirm_non_idempotent=True
    )
    assert after.status == "succeeded"
    assert ApprovalRequest.objects.filter(run=after).count() == 0  # the decision reused
    assert api.requests("refunds")[-1].json()["note"] == "first"
    before = run_restart(
        run=Run.objects.get(pk=run.pk), from_step="confirm", confirm_non_idempotent=True
    )
    assert before.status == "waiting"
    assert request_of(before).decisions.count() == 0


def test_a_decision_while_other_steps_still_run_is_found_by_the_driver(api, people):
    """In process, the run's driver finds a step decided before it ran out of work."""
    workflow = activate(refund_flow())
    run = run_create(workflow=workflow, trigger="api", inputs={})
    decided = {}

    def observer(event: str, result: StepResult) -> None:
        if event == "waiting" and not decided:  # decide at once, while the driver runs
            decided["request"] = approval_decide(
                request_id=ApprovalRequest.objects.get(run=run).pk, user=people["bob"],
                approve=True, values={"note": "quick"}, via="api",
            )  # fmt: skip

    run = run_execute(run=run, observer=observer)
    assert decided
    assert run.status == "succeeded"
    assert api.requests("refunds")[0].json()["note"] == "quick"


def test_beat_expires_the_requests_whose_time_is_up(api, people, settings):
    from runs.tasks import expire_approvals

    assert settings.CELERY_BEAT_SCHEDULE["flowpilot-expire-approvals"]["task"] == (
        "runs.expire_approvals"
    )
    run = waiting_run(timeout=1, on_timeout="skip")
    ApprovalRequest.objects.filter(run=run).update(expires_at=timezone.now())
    assert expire_approvals() == 1
    assert Run.objects.get(pk=run.pk).status == "succeeded"


def test_the_long_poll_answers_when_the_run_waits_for_a_person(api, people):
    from runs.waiting import run_wait

    run = waiting_run()
    read, finished = run_wait(run_id=run.pk, timeout=5)
    assert (read.status, finished) == ("waiting", False)


def test_in_process_a_parent_step_cannot_wait_for_its_childs_approval(api, people):
    activate(refund_flow())
    parent = activate(
        {
            "name": "parent",
            "steps": [{"id": "child", "kind": "workflow", "workflow": "refunds"}],
        }
    )
    run = run_execute(run=run_create(workflow=parent, trigger="cli", inputs={}))
    assert run.status == "failed"
    assert "waits for an approval: in process (no broker)" in run.error_summary
    child = Run.objects.get(parent_run=run)
    assert child.status == "waiting"  # still decidable on its own


def test_a_request_whose_step_has_not_finished_starting_to_wait_is_not_decided_yet(api, people):
    from runs.approvals import ApprovalNotReady

    run = waiting_run()
    request = request_of(run)
    StepResult.objects.filter(run=run, step_id="confirm").update(status="running")
    with pytest.raises(ApprovalNotReady, match="try again in a moment"):
        approval_decide(request_id=request.pk, user=people["bob"], approve=True,
                        values={"note": "early"}, via="api")  # fmt: skip
    assert approvals_expire(now=timezone.now() + timedelta(days=1)) == 0  # nor expired
    StepResult.objects.filter(run=run, step_id="confirm").update(status="waiting")
    approval_decide(request_id=request.pk, user=people["bob"], approve=True,
                    values={"note": "now"}, via="api")  # fmt: skip
    assert Run.objects.get(pk=run.pk).status == "succeeded"


def test_in_a_child_run_the_author_is_who_started_the_top_level_run(api, people):
    from runs.engine.kinds.approval import _author

    parent = Run.objects.get(pk=waiting_run(started_by=people["alice"]).pk)
    child = run_create(workflow=parent.workflow, trigger="workflow", inputs={})
    Run.objects.filter(pk=child.pk).update(parent_run=parent)
    child.refresh_from_db()
    assert child.started_by_id is None
    assert _author(child) == people["alice"].pk
