"""runs.engine.kinds.loop: a review-and-fix loop run in process against a loopback
reviewer, restarted from an iteration, resumed after a failed iteration, and replayed
offline (the Celery driver: tests/runs/test_celery_loops.py).

The child ``fixup`` sends its text to the loopback ``check`` tool, which fails
``"hi"`` and ``"hi!"`` and passes ``"hi!!"`` (``tests.runs.loops``).
"""

from __future__ import annotations

import pytest

from runs.engine.kinds.loop import finished_iterations
from runs.models import Run, ToolCallRecording
from runs.replay.services import version_replay
from runs.restart import run_restart
from runs.services import run_create, run_execute, run_resume
from tests.fakes import FakeAPI, FakeResponse
from tests.runs.loops import (
    checks,
    fixup_flow,
    install_check,
    load_check_tool,
    polish_flow,
    reviewer,
)
from tests.runs.subflows import activate, approve

pytestmark = pytest.mark.django_db(transaction=True)

ITERATIONS = [
    {"text": "hi", "passed": False, "feedback": "!"},
    {"text": "hi!", "passed": False, "feedback": "!"},
    {"text": "hi!!", "passed": True, "feedback": ""},
]


@pytest.fixture
def reviewer_api():
    fake = FakeAPI().start()
    install_check(fake)
    load_check_tool(fake)
    yield fake
    fake.stop()


def run_polish(workflow, draft: str = "hi") -> Run:
    return run_execute(run=run_create(workflow=workflow, trigger="api", inputs={"draft": draft}))


def iterations_of(run: Run) -> list[Run]:
    return list(Run.objects.filter(parent_step__run=run).order_by("pk"))


def test_the_loop_runs_until_the_check_passes_on_the_third_iteration(reviewer_api):
    activate(fixup_flow())
    polish = activate(polish_flow())

    run = run_polish(polish)

    assert run.status == "succeeded", run.error_summary
    assert checks(reviewer_api) == ["hi", "hi!", "hi!!"]
    assert run.outputs == {"final": "hi!!", "rounds": 3, "held": True}
    review = run.step_results.get(step_id="review")
    assert review.output == {
        "last": ITERATIONS[-1],
        "count": 3,
        "condition_held": True,
        "iterations": ITERATIONS,
    }
    children = iterations_of(run)
    assert [(c.status, c.trigger, c.parent_step_id) for c in children] == [
        ("succeeded", "workflow", review.pk)
    ] * 3
    assert [c.inputs for c in children] == [
        {"draft": "hi", "feedback": ""},
        {"draft": "hi", "feedback": "!"},
        {"draft": "hi!", "feedback": "!"},
    ]
    assert [i.number for i in finished_iterations(polish_flow_step(run), review)] == [1, 2, 3]


def polish_flow_step(run: Run):
    from workflows.services import workflow_spec

    return workflow_spec(run.workflow).step("review")


def test_at_max_iterations_the_step_fails_naming_itself_and_the_count(reviewer_api):
    activate(fixup_flow())
    polish = activate(polish_flow(max_iterations=2))

    run = run_polish(polish)

    assert run.status == "failed"
    review = run.step_results.get(step_id="review")
    assert review.error["type"] == "loop_exhausted"
    assert "step `review`" in review.error["message"]
    assert "did not hold after 2 iterations" in review.error["message"]
    assert checks(reviewer_api) == ["hi", "hi!"]  # never a third
    assert run.step_results.get(step_id="publish").status == "skipped"


def test_on_exhausted_continue_goes_on_with_the_last_iteration(reviewer_api):
    activate(fixup_flow())
    polish = activate(polish_flow(max_iterations=2, on_exhausted="continue"))

    run = run_polish(polish)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"final": "hi!", "rounds": 2, "held": False}


def test_restart_from_iteration_two_reuses_the_first(reviewer_api, cli):
    activate(fixup_flow())
    polish = activate(polish_flow())
    first = run_polish(polish)
    reviewer_api.clear()

    result = cli("restartflow", str(first.pk), "--from", "review#2")

    assert result.code == 0, result.out + result.err
    again = Run.objects.get(restarted_from=first)
    assert (again.status, again.restarted_from_step) == ("succeeded", "review#2")
    assert "from step `review#2`" in result.out
    assert checks(reviewer_api) == ["hi!", "hi!!"]  # iteration 1 is not sent again
    assert again.outputs == first.outputs
    assert again.step_results.get(step_id="review").output["iterations"] == ITERATIONS
    children = iterations_of(again)
    assert [c.inputs for c in children] == [
        {"draft": "hi", "feedback": "!"},  # from the reused iteration 1's outputs
        {"draft": "hi!", "feedback": "!"},
    ]
    step = polish_flow_step(again)
    done = finished_iterations(step, again.step_results.get(step_id="review"))
    assert [(i.number, i.reused, i.run.parent_run_id) for i in done] == [
        (1, True, first.pk),
        (2, False, again.pk),
        (3, False, again.pk),
    ]

    # a restart of the restart from iteration 3 reuses 1 (through the chain) and 2
    reviewer_api.clear()
    third = run_restart(run=again, from_step="review#3")
    assert third.status == "succeeded", third.error_summary
    assert checks(reviewer_api) == ["hi!!"]


def test_a_loop_reused_by_a_restart_downstream_keeps_its_iterations(reviewer_api):
    activate(fixup_flow())
    first = run_polish(activate(polish_flow()))
    later = run_restart(run=first, from_step="publish")  # the loop's result is copied
    assert later.step_results.get(step_id="review").reused
    reviewer_api.clear()

    again = run_restart(run=later, from_step="review#3")

    assert again.status == "succeeded", again.error_summary
    assert checks(reviewer_api) == ["hi!!"]  # iterations 1 and 2 are those of the first run
    assert again.step_results.get(step_id="review").output["iterations"] == ITERATIONS


@pytest.mark.parametrize(
    ("point", "message"),
    [
        ("publish#2", "is a `transform` step; only a `loop` step restarts from an iteration"),
        ("review#5", "cannot restart from iteration 5: 3 of its iterations succeeded"),
        ("review#0", "is not a restart point"),
        ("review#x", "is not a restart point"),
        ("nope#2", "has no step `nope`"),
    ],
)
def test_a_restart_point_that_cannot_be_is_refused_by_name(reviewer_api, cli, point, message):
    activate(fixup_flow())
    polish = activate(polish_flow())
    first = run_polish(polish)

    result = cli("restartflow", str(first.pk), "--from", point)

    assert result.code == 1
    assert message in result.err, result.err
    assert not Run.objects.filter(restarted_from=first).exists()


def test_iteration_four_of_a_loop_that_held_at_three_is_refused(reviewer_api, cli):
    activate(fixup_flow())
    first = run_polish(activate(polish_flow()))

    result = cli("restartflow", str(first.pk), "--from", "review#4")

    assert result.code == 1
    assert "finished after iteration 3; there is no iteration 4" in result.err, result.err


def test_resume_of_a_failed_loop_continues_from_the_failed_iteration(reviewer_api):
    activate(fixup_flow())
    polish = activate(polish_flow())

    def refuse_second(request, match) -> FakeResponse:
        if request.json()["text"] == "hi!":
            return FakeResponse.json({"error": "reviewer away"}, status=422)
        return FakeResponse.json({"passed": False, "feedback": "!", "text": "hi"})

    reviewer_api.respond("check", refuse_second)
    run = run_polish(polish)
    assert run.status == "failed"
    review = run.step_results.get(step_id="review")
    assert review.error["type"] == "subworkflow_failed"
    assert "step `review`, iteration 2: workflow `fixup`" in review.error["message"]
    reviewer_api.respond("check", reviewer)

    run = run_resume(run=run)

    assert run.status == "succeeded", run.error_summary
    assert run.outputs == {"final": "hi!!", "rounds": 3, "held": True}
    sent = checks(reviewer_api)
    assert sent.count("hi") == 1  # iteration 1 never ran again
    assert sent[-1] == "hi!!"
    children = iterations_of(run)
    assert len(children) == 3  # the failed iteration's child was resumed, not replaced
    assert [c.status for c in children] == ["succeeded"] * 3


def test_the_loop_replays_offline_every_iteration_from_its_recorded_child(reviewer_api, approver):
    approve(fixup_flow(), approver, {"draft": "hi"})
    polish = approve(polish_flow(), approver, {"draft": "hi"})
    validation = Run.objects.get(workflow=polish, trigger="validation")
    assert validation.outputs == {"final": "hi!!", "rounds": 3, "held": True}
    recorded = iterations_of(validation)
    assert len(recorded) == 3
    assert all(
        ToolCallRecording.objects.filter(
            step_result__run=child, step_result__step_id="check"
        ).exists()
        for child in recorded
    )
    reviewer_api.stop()  # nothing answers on the network from here on
    sent = len(reviewer_api.requests())

    report = version_replay(version=polish)

    replay = Run.objects.get(trigger="replay", parent_run=None)
    assert replay.status == "succeeded", replay.error_summary
    assert replay.outputs == validation.outputs
    children = iterations_of(replay)
    assert [c.replay_of_id for c in children] == [c.pk for c in recorded]
    assert [c.status for c in children] == ["succeeded"] * 3
    assert len(reviewer_api.requests()) == sent
    assert report.matched, report.summary


def test_the_admin_restart_page_offers_the_loops_iterations(reviewer_api, operator):
    activate(fixup_flow())
    first = run_polish(activate(polish_flow()))
    reviewer_api.clear()

    form = operator.get(f"/admin/runs/run/{first.pk}/restart/").content.decode()
    assert 'value="review#2">step review, from iteration 2<' in form
    assert 'value="review#3">step review, from iteration 3<' in form
    assert "review#4" not in form
    assert "review#1" not in form  # iteration 1: the step itself

    done = operator.post(
        f"/admin/runs/run/{first.pk}/restart/", {"from_step": "review#3"}, follow=True
    )

    again = Run.objects.get(restarted_from=first)
    assert done.redirect_chain[-1][0] == f"/admin/runs/run/{again.pk}/change/"
    assert (again.status, again.restarted_from_step) == ("succeeded", "review#3")
    assert checks(reviewer_api) == ["hi!!"]


def test_the_restart_api_takes_an_iteration(reviewer_api):
    from django.contrib.auth import get_user_model

    from tests.api.conftest import client_for

    operator_api = client_for(get_user_model().objects.create_superuser("root", "r@x.y", "pw"))
    activate(fixup_flow())
    first = run_polish(activate(polish_flow()))
    reviewer_api.clear()

    response = operator_api.post(
        f"/api/v1/runs/{first.pk}/restart/", {"from_step": "review#2"}, format="json"
    )

    assert response.status_code in (200, 201, 202), response.content
    again = Run.objects.get(restarted_from=first)
    assert again.restarted_from_step == "review#2"
    assert checks(reviewer_api) == ["hi!", "hi!!"]


def test_the_dry_run_shows_the_loop_its_condition_and_bound(reviewer_api, cli, tmp_path):
    import yaml

    activate(fixup_flow())
    path = tmp_path / "polish.yaml"
    path.write_text(yaml.safe_dump(polish_flow()), encoding="utf-8")

    result = cli("runflow", str(path), "--dry-run", "--input", "draft=hi")

    assert result.code == 0, result.out + result.err
    assert "loops over workflow: fixup" in result.out
    assert "until: output.passed == true (at most 5 iterations; then fail)" in result.out
    assert "draft = $loop.previous.text" in result.out
    assert checks(reviewer_api) == []  # a dry run calls nothing
