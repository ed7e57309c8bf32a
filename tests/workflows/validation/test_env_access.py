"""workflows.validation.env_access: a workflow reads only declared or allowed variables."""

from __future__ import annotations

import pytest

from tests.workflows.test_validator import REGISTRY
from workflows.validation.env_access import allowed_env, env_name_allowed
from workflows.validator import validate_workflow


def flow(**mapping) -> dict:
    return {
        "name": "env",
        "steps": [
            {
                "id": "page",
                "kind": "tool",
                "tool": "fetch",
                "input_mapping": {"url": "https://example.com", **mapping},
            }
        ],
    }


def test_a_variable_no_tool_declares_is_refused_naming_it_and_the_fix(settings):
    settings.FLOWPILOT_ENV_ALLOW = []
    report = validate_workflow(
        flow(key="$env.DJANGO_SECRET_KEY", ai="$env.OPENAI_API_KEY"), registry=REGISTRY
    )
    issues = [(i.code, i.path) for i in report.issues]
    assert issues == [
        ("env_not_allowed", "steps[0].input_mapping.ai"),
        ("env_not_allowed", "steps[0].input_mapping.key"),
    ]
    message = report.issues[1].message
    assert "`$env.DJANGO_SECRET_KEY`" in message
    assert "FLOWPILOT_ENV_ALLOW" in message


def test_declared_and_operator_allowed_variables_pass(settings):
    settings.FLOWPILOT_ENV_ALLOW = ["REPORT_*", "TEAM"]
    report = validate_workflow(
        flow(token="$env.API_TOKEN", note="$env.REPORT_NOTE", team="$env.TEAM"),
        registry=REGISTRY,
    )
    assert list(report.issues) == []


@pytest.mark.parametrize(
    ("name", "allowed"),
    [("API_TOKEN", True), ("REPORT_X", True), ("REPORTX", False), ("report_x", False)],
)
def test_names_match_declared_names_or_case_sensitive_globs(name, allowed):
    declared = frozenset({"API_TOKEN"})
    assert env_name_allowed(name, declared=declared, allow=["REPORT_*"]) is allowed
    kept = allowed_env({name: "v"}, declared=declared, allow=["REPORT_*"])
    assert (name in kept) is allowed


@pytest.mark.parametrize("allow", [[], ["TEAM"], ["TEAM", "REPORT_*"], ["T?AM"], ["[T]EAM"]])
def test_the_allowed_part_is_the_same_with_and_without_globs(allow):
    """Names alone are looked up one by one; a glob walks the environment: same answer."""
    env = {"API_TOKEN": "t", "TEAM": "a", "REPORT_NOTE": "n", "HOME": "/h", "team": "b"}
    declared = frozenset({"API_TOKEN", "MISSING"})
    expected = {
        name: value
        for name, value in sorted(env.items())
        if env_name_allowed(name, declared=declared, allow=allow)
    }
    kept = allowed_env(env, declared=declared, allow=allow)
    assert kept == expected
    assert list(kept) == sorted(kept)
    assert not {"HOME", "team", "MISSING"} & kept.keys()
