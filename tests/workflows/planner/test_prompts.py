"""workflows.planner.prompts: what the planner's model is told — the kind list derived
from the step union, the templates, the questions offer, and the repair message."""

from __future__ import annotations

from workflows.planner.prompts import (
    REPLY_INVALID,
    SYSTEM_PROMPT,
    create_messages,
    repair_message,
    response_format,
    revise_messages,
)
from workflows.schema import step_models
from workflows.validation.report import ValidationIssue


def issue(code: str, severity: str = "error", path: str = "steps[0]") -> ValidationIssue:
    return ValidationIssue(code=code, path=path, message=f"{code} here", severity=severity)


def user_text(**kwargs) -> str:
    args = {"goal": "g", "catalog": "{}", "sample_inputs": None, **kwargs}
    return create_messages(**args)[1]["content"]


def test_the_system_prompt_lists_every_kind_offered_without_templates_in_union_order():
    lines = [
        line for line in SYSTEM_PROMPT.splitlines() if line.startswith("- ") and ': {"id"' in line
    ]
    offered = [m for m in step_models() if not m.planner_needs_templates]
    assert [line.split(":")[0][2:] for line in lines] == [
        m.model_fields["kind"].default for m in offered
    ]


def test_templates_bring_the_reuse_offer_and_none_bring_nothing():
    assert "reuse it as one step" in user_text(templates='{"name": "t"}')
    assert "Approved workflows" not in user_text()


def test_questions_are_offered_or_closed():
    assert "clarifying questions" in user_text(ask=True)
    closed = user_text(clarifications="Q: which? A: this")
    assert "Do not ask more questions" in closed
    assert "Q: which? A: this" in closed
    assert "Do not ask more questions" not in user_text()


def test_sample_inputs_are_shown_as_json():
    assert 'Sample inputs (what a first run will use): {"city": "Oslo"}' in user_text(
        sample_inputs={"city": "Oslo"}
    )


def test_a_revision_keeps_the_name_and_quotes_the_feedback():
    messages = revise_messages(
        goal="g", catalog="{}", previous={"name": "w"}, version=2, feedback="add a step"
    )
    assert messages[0]["content"] == SYSTEM_PROMPT
    assert 'Keep "name": "w"' in messages[1]["content"]
    assert "Reviewer feedback:\nadd a step" in messages[1]["content"]


def test_a_repair_lists_errors_and_only_the_warnings_that_matter():
    text = repair_message(
        [issue("not_ancestor"), issue("unused_input", "warning"), issue("style", "warning")]
    )["content"]
    assert text.startswith("The workflow you returned has 1 problem(s):")
    assert "- steps[0] [not_ancestor]: not_ancestor here" in text
    assert "Also fix these 1 warning(s):" in text
    assert "[style]" not in text


def test_an_unusable_reply_is_said_so():
    text = repair_message([issue(REPLY_INVALID, path="")])["content"]
    assert text.startswith("Your reply could not be used:")
    assert "- (workflow) [reply_invalid]" in text


def test_the_response_format_is_the_workflow_schema_or_a_choice_with_questions():
    plain = response_format()["json_schema"]
    assert plain["name"] == "workflow"
    assert "steps" in plain["schema"]["properties"]
    both = response_format(questions=True)["json_schema"]
    assert both["name"] == "plan_or_questions"
    assert len(both["schema"]["oneOf"]) == 2
