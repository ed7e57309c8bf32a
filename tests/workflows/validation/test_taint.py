"""workflows.validation.taint: a credential goes only into the credential slot of a tool.

The tools are real tool definitions (``tools.loader``), so what counts as a credential
is decided by ``tools.secrets`` exactly as at run time.
"""

from __future__ import annotations

from typing import Any

import pytest

from tools.loader import load_tool_text
from tools.registry import ToolRegistry
from workflows.validator import validate_workflow

TOOLS = """
tools:
  - name: stoken_api
    description: Reads a report with a bearer token from the environment.
    base_url: https://reports.example
    request: {url: "/reports/{{report}}"}
    auth: {type: bearer, token: "{{env.STOKEN}}"}
    inputs: {type: object, properties: {report: {type: string}}, required: [report]}
    response_extract: {title: title, body: body}
    outputs: [title, body]
  - name: signed_post
    description: Posts a payload signed with a key given as an argument.
    base_url: https://hooks.example
    request:
      method: POST
      url: /in
      headers: {X-Signature: "{{signature}}", X-Org: "{{env.ORG}}"}
      secret_headers: [X-Signature]
      body: "{{payload}}"
    auth: {type: bearer, token: "Token {{token}}"}
    inputs:
      type: object
      properties: {payload: {}, signature: {type: string}, token: {type: string}}
      required: [payload]
  - name: hook
    description: Posts to a webhook whose URL is the credential.
    secret_env: [HOOK_URL]
    base_url: "{{env.HOOK_URL}}"
    request: {method: POST, body: "{{payload}}"}
    inputs: {type: object, properties: {payload: {}}, required: [payload]}
"""
REGISTRY = ToolRegistry(load_tool_text(TOOLS))


def codes(report: Any) -> list[tuple[str, str]]:
    return sorted((i.code, i.path) for i in report.issues if i.severity == "error")


def leak(report: Any) -> list[Any]:
    return [i for i in report.issues if i.code == "credential_leak"]


def test_the_issue_s_leak_a_credential_through_a_transform_into_a_prompt_is_refused():
    """The reported leak: a tool takes `$env.STOKEN` as its bearer credential; a transform
    maps `$env.STOKEN` and an llm step's prompt reads the transform's output. It validated
    clean, and the derived token reached the LLM. Now the transform's mapping is the error."""
    flow = {
        "name": "stoken_leak",
        "steps": [
            {"id": "read", "kind": "tool", "tool": "stoken_api",
             "input_mapping": {"report": "weekly"}},
            {"id": "shape", "kind": "transform", "expression": "{token: tok, title: title}",
             "input_mapping": {"tok": "$env.STOKEN", "title": "read.title"}},
            {"id": "ask", "kind": "llm", "prompt": "Summarize {{title}} ({{token}})",
             "input_mapping": {"title": "shape.title", "token": "shape.token"}},
        ],
        "outputs": {"summary": "ask.result"},
    }  # fmt: skip

    report = validate_workflow(flow, registry=REGISTRY)

    assert codes(report) == [("credential_leak", "steps[1].input_mapping.tok")]
    (issue,) = report.issues
    assert issue.step_id == "shape"
    assert "`$env.STOKEN`" in issue.message
    assert "tool `stoken_api`" in issue.message
    assert "into a transform" in issue.message
    assert "give the tool the credential through its auth" in issue.message
    assert "{{env.STOKEN}}" in issue.message


def step(kind: str, **fields: Any) -> dict[str, Any]:
    return {"id": "s", "kind": kind, **fields}


@pytest.mark.parametrize(
    ("mapped", "path", "place"),
    [
        (step("decision", branches=["yes", "no"], conditions={"yes": "t == 'x'"},
              default="no", input_mapping={"t": "$env.STOKEN"}),
         "steps[0].input_mapping.t", "into a decision"),
        (step("foreach", tool="hook", input_mapping={"items": "$env.STOKEN"},
              item_mapping={"payload": "$item"}),
         "steps[0].input_mapping.items", "the list a foreach runs over"),
        (step("foreach", tool="hook", input_mapping={"items": ["a"]},
              item_mapping={"payload": "$env.STOKEN"}),
         "steps[0].item_mapping.payload", "parameter `payload` of tool `hook`"),
        (step("tool", tool="hook", input_mapping={"payload": "$env.STOKEN"}),
         "steps[0].input_mapping.payload", "which takes no credential in its arguments"),
        (step("tool", tool="signed_post", input_mapping={"payload": {"k": ["$env.STOKEN"]}}),
         "steps[0].input_mapping.payload.k[0]", "part of parameter `payload`"),
        (step("tool", tool="signed_post",
              input_mapping={"payload": "$env.HOOK_URL", "token": "$env.STOKEN"}),
         "steps[0].input_mapping.payload", "whose credential slot is `signature`, `token`"),
        (step("transform", expression="x", input_mapping={"x": "Bearer $env.STOKEN"}),
         "steps[0].input_mapping.x", "into a transform"),
        (step("transform", expression="x", input_mapping={"x": {"h": "{{ env.HOOK_URL }}"}}),
         "steps[0].input_mapping.x.h", "into a transform"),
    ],
    ids=["decision", "foreach_items", "foreach_item", "tool_param", "nested", "other_tools",
         "text_reference", "text_template"],
)  # fmt: skip
def test_a_credential_anywhere_but_a_credential_slot_is_an_error_naming_step_and_path(
    mapped, path, place
):
    flow = {"name": "leaks", "steps": [mapped], "tools": ["stoken_api", "hook", "signed_post"]}

    issues = leak(validate_workflow(flow, registry=REGISTRY))

    assert [i.path for i in issues] == [path], [i.message for i in issues]
    assert place in issues[0].message
    assert issues[0].step_id == "s"
    assert "through its auth" in issues[0].message


def test_a_child_workflow_input_may_not_carry_a_credential():
    child = {"name": "child", "inputs": {"t": {"type": "string"}},
             "steps": [{"id": "r", "kind": "tool", "tool": "stoken_api",
                        "input_mapping": {"report": "$input.t"}}]}  # fmt: skip
    from workflows.schema import WorkflowSpec

    flow = {
        "name": "parent",
        "tools": ["stoken_api"],
        "steps": [step("workflow", workflow="child", input_mapping={"t": "$env.STOKEN"})],
    }
    issues = leak(
        validate_workflow(
            flow, registry=REGISTRY, workflows={"child": WorkflowSpec.model_validate(child)}
        )
    )
    assert [i.path for i in issues] == ["steps[0].input_mapping.t"]
    assert "an input of the child workflow" in issues[0].message


def test_the_credential_slot_of_a_tool_takes_the_credential():
    flow = {
        "name": "slots",
        "tools": ["stoken_api", "signed_post", "hook"],
        "steps": [
            step("tool", tool="signed_post", input_mapping={
                "payload": {"n": 1}, "token": "$env.STOKEN", "signature": "$env.HOOK_URL"}),
        ],
    }  # fmt: skip
    report = validate_workflow(flow, registry=REGISTRY)
    assert report.ok, [i.message for i in report.issues]


def test_configuration_that_no_tool_declares_secret_maps_freely(settings):
    settings.FLOWPILOT_ENV_ALLOW = ["TEAM"]
    flow = {
        "name": "config",
        "tools": ["signed_post"],
        "steps": [
            step("transform", expression="{org: org, team: team}",
                 input_mapping={"org": "$env.ORG", "team": "$env.TEAM"}),
        ],
    }  # fmt: skip
    report = validate_workflow(flow, registry=REGISTRY)
    assert report.ok, [i.message for i in report.issues]


def test_a_credential_of_any_registered_tool_counts_even_one_the_workflow_does_not_use(
    settings,
):
    """Another workflow's tool declares STOKEN secret: it is a credential here too (the
    operator allowed reading it by name, which does not make it configuration)."""
    settings.FLOWPILOT_ENV_ALLOW = ["STOKEN"]
    transform = step("transform", expression="x", input_mapping={"x": "$env.STOKEN"})
    flow = {"name": "other", "tools": ["hook"], "steps": [transform]}
    assert [i.path for i in leak(validate_workflow(flow, registry=REGISTRY))] == [
        "steps[0].input_mapping.x"
    ]


def test_llm_steps_and_outputs_keep_their_own_codes_without_a_second_error():
    flow = {
        "name": "own_codes",
        "tools": ["stoken_api"],
        "steps": [step("llm", prompt="{{t}}", input_mapping={"t": "$env.STOKEN"})],
        "outputs": {"t": "$env.STOKEN"},
    }
    assert codes(validate_workflow(flow, registry=REGISTRY)) == [
        ("env_in_output", "outputs.t"),
        ("env_in_prompt", "steps[0].input_mapping.t"),
    ]


def test_without_a_registry_nothing_is_a_credential():
    flow = {"name": "bare", "steps": [step("transform", expression="x",
                                             input_mapping={"x": "$env.STOKEN"})]}  # fmt: skip
    assert leak(validate_workflow(flow, registry=None)) == []
