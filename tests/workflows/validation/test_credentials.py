"""workflows.validation.credentials: a step's tool whose stored credential does not
exist is ``credential_unknown``, the names read from the database only when needed."""

from __future__ import annotations

import pytest

from tools.models import Credential
from tools.registry import ToolRegistry
from tools.spec import ToolSpec
from workflows.validation.credentials import StoredCredentialNames, tool_credential
from workflows.validator import validate_workflow

pytestmark = pytest.mark.django_db


def _tool(name, **auth):
    http = {"base_url": "https://api.example", "request": {"url": f"/{name}"}}
    if auth:
        http["auth"] = auth
    return ToolSpec.model_validate({"name": name, "http": http})


REGISTRY = ToolRegistry(
    [_tool("issues", credential="github_ap"), _tool("repos", credential="github_app"),
     _tool("public")]
)  # fmt: skip


def _flow(*steps):
    return {"name": "f", "steps": list(steps)}


def test_a_tool_whose_credential_does_not_exist_is_named_with_the_closest_one():
    Credential.objects.create(name="github_app", type="bearer")
    ok = validate_workflow(_flow({"id": "r", "kind": "tool", "tool": "repos"}), registry=REGISTRY)
    assert ok.errors == ()
    report = validate_workflow(
        _flow(
            {"id": "i", "kind": "tool", "tool": "issues"},
            {"id": "ask", "kind": "llm", "prompt": "Sum up", "tools": ["issues"]},
        ),
        registry=REGISTRY,
    )
    assert [(i.code, i.path) for i in report.errors] == [
        ("credential_unknown", "steps[0].tool"),
        ("credential_unknown", "steps[1].tools[0]"),
    ]
    assert report.errors[0].message == (
        "step `i` uses tool `issues`, whose credential `github_ap` does not exist "
        "(did you mean `github_app`?); create it in the admin (Credentials) or fix the "
        "tool's `auth: {credential: …}`"
    )


def test_the_names_are_read_once_and_only_when_a_tool_names_a_credential(
    django_assert_num_queries,
):
    with django_assert_num_queries(0):
        validate_workflow(_flow({"id": "p", "kind": "tool", "tool": "public"}), registry=REGISTRY)
    steps = [{"id": f"s{n}", "kind": "tool", "tool": "issues"} for n in range(3)]
    with django_assert_num_queries(1):
        report = validate_workflow(_flow(*steps), registry=REGISTRY)
    assert len(report.errors) == 3
    names = StoredCredentialNames()
    assert names.names() == frozenset()


def test_tool_credential_reads_what_a_lookup_offers():
    assert tool_credential(REGISTRY.get("repos")) == "github_app"
    assert tool_credential(REGISTRY.get("public")) is None
    assert tool_credential(object()) is None
