"""Building a run's context (``runs.engine.build``): what one run may read and hold.

The environment holds only the variables the workflow's allowed tools declare and the
operator's ``FLOWPILOT_ENV_ALLOW``; the redactor masks declared secrets, not the
configuration beside them; an LLM client is built (and owned) only when the plan needs one.
"""

from __future__ import annotations

import pytest

from runs.engine.build import build_run_context
from runs.engine.plan import compile_plan
from runs.engine.resolve import resolve_step_call
from tools.llm import LLMClient
from workflows.schema import WorkflowSpec

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("example_tools")]

ENV = {
    "GITHUB_TOKEN": "ghp-0123456789",  # declared by github_repo: its credential
    "GITHUB_API_BASE_URL": "https://ghe.example/api/v3",  # declared: configuration
    "REPORT_NOTE": "weekly",  # allowed by the operator (below)
    "DJANGO_SECRET_KEY": "dj-key",  # nobody declares or allows it
    "RESTCOUNTRIES_BASE_URL": "https://rc.example",  # declared by a tool the flow may not use
}


def spec_of(*steps: dict) -> WorkflowSpec:
    return WorkflowSpec.model_validate({"name": "probe", "steps": list(steps)})


REPO_STEP = {"id": "r", "kind": "tool", "tool": "github_repo",
             "input_mapping": {"owner": "$input.o", "repo": "$input.r"}}  # fmt: skip
LLM_STEP = {"id": "ask", "kind": "llm", "prompt": "Say hello"}


def test_the_run_redactor_holds_declared_secrets_only():
    env = {"GITHUB_TOKEN": "ghp-0123456789", "GITHUB_API_BASE_URL": "https://ghe.example/api/v3"}
    spec = WorkflowSpec.model_validate(
        {"name": "probe", "steps": [{"id": "r", "kind": "tool", "tool": "github_repo",
          "input_mapping": {"owner": "$input.o", "repo": "$input.r"}}]}
    )  # fmt: skip
    with build_run_context(run_id=1, spec=spec, env=env) as ctx:
        text = "ghp-0123456789 at https://ghe.example/api/v3"
        assert ctx.redactor.scrub_text(text) == "*** at https://ghe.example/api/v3"


def test_a_run_reads_only_declared_or_allowed_environment_variables(settings):
    settings.FLOWPILOT_ENV_ALLOW = ["REPORT_*"]
    spec = WorkflowSpec.model_validate(
        {
            "name": "env_probe",
            "steps": [
                {
                    "id": "post",
                    "kind": "tool",
                    "tool": "post_json",
                    "input_mapping": {
                        "payload": {
                            "key": "$env.DJANGO_SECRET_KEY",
                            "token": "$env.GITHUB_TOKEN",
                            "note": "$env.REPORT_NOTE",
                        }
                    },
                }
            ],
            "tools": ["post_json", "github_repo"],
        }
    )
    env = {"DJANGO_SECRET_KEY": "dj-key", "GITHUB_TOKEN": "ghp-x", "REPORT_NOTE": "weekly"}
    with build_run_context(run_id=1, spec=spec, env=env) as ctx:
        args, _ = resolve_step_call(ctx, spec.steps[0], inputs={}, step_value=lambda _: None)
        assert "DJANGO_SECRET_KEY" not in ctx.env  # even unvalidated, it is not readable
    assert args["payload"] == {"key": None, "token": "ghp-x", "note": "weekly"}


def test_the_env_holds_the_allowed_tools_declared_variables_and_the_operators_only(settings):
    settings.FLOWPILOT_ENV_ALLOW = ["REPORT_*"]

    with build_run_context(run_id=1, spec=spec_of(REPO_STEP), env=ENV) as ctx:
        assert ctx.env == {
            "GITHUB_TOKEN": "ghp-0123456789",
            "GITHUB_API_BASE_URL": "https://ghe.example/api/v3",
            "REPORT_NOTE": "weekly",
        }

    settings.FLOWPILOT_ENV_ALLOW = []
    with build_run_context(run_id=1, spec=spec_of(REPO_STEP), env=ENV) as ctx:
        assert "REPORT_NOTE" not in ctx.env


def test_the_redactor_masks_every_declared_secret_even_of_a_tool_the_flow_does_not_use():
    """The redactor is built from the whole environment, not the run's view of it: a
    credential echoed back by any answer is masked by value; the base URLs (declared
    too, but configuration) stay in clear."""
    country = {"id": "c", "kind": "tool", "tool": "country_info", "input_mapping": {"code": "fr"}}
    with build_run_context(run_id=1, spec=spec_of(country), env=ENV) as ctx:
        assert "GITHUB_TOKEN" not in ctx.env  # github_repo is not this flow's tool
        masked = ctx.redactor.scrub(
            {
                "auth": "Bearer ghp-0123456789",
                "urls": [ENV["GITHUB_API_BASE_URL"], "https://rc.example"],
            }
        )
    assert masked == {
        "auth": "Bearer ***",
        "urls": ["https://ghe.example/api/v3", "https://rc.example"],
    }


def test_an_llm_client_is_built_and_owned_only_when_the_plan_needs_one(settings):
    settings.OPENAI_API_KEY = "sk-test-0123456789"  # a configured endpoint (nothing is sent)
    with build_run_context(run_id=1, spec=spec_of(REPO_STEP), env=ENV) as ctx:
        assert (ctx.llm, ctx.owns_llm) == (None, False)

    with build_run_context(run_id=1, spec=spec_of(LLM_STEP), env=ENV) as ctx:
        assert isinstance(ctx.llm, LLMClient)
        assert ctx.owns_llm is True  # closed with the context

    given = LLMClient.from_settings()
    try:
        with build_run_context(run_id=1, spec=spec_of(LLM_STEP), env=ENV, llm=given) as ctx:
            assert (ctx.llm, ctx.owns_llm) == (given, False)  # the caller closes its own
    finally:
        given.close()


def test_a_compiled_plan_is_used_as_given_and_its_spec_is_the_contexts():
    plan = compile_plan(spec_of(REPO_STEP))

    with build_run_context(run_id=7, plan=plan, env=ENV) as ctx:
        assert (ctx.run_id, ctx.spec, ctx.graph, ctx.parsed) == (
            7,
            plan.spec,
            plan.graph,
            plan.parsed,
        )
        assert ctx.run_uuid  # a context without a stored run still gets a unique key
    with build_run_context(run_id=7, plan=plan, env=ENV) as again:
        assert again.run_uuid != ctx.run_uuid


def test_a_context_built_from_a_compiled_plan_does_not_walk_the_steps_again(monkeypatch):
    """Every Celery step task builds a context: its allowlist (and so the environment it
    may read) comes from the plan, compiled once per version, not from a walk over every
    step of the spec (a thousand-step graph paid it at each of its thousand tasks)."""
    plan = compile_plan(spec_of(REPO_STEP))

    def walked(self):
        raise AssertionError("the spec's steps were walked for a context")

    monkeypatch.setattr(WorkflowSpec, "allowlist", walked)
    monkeypatch.setattr(WorkflowSpec, "allowed_tools", walked)
    with build_run_context(run_id=7, plan=plan, env=ENV) as ctx:
        assert ctx.allowed_tools == plan.allowed_tools == {"github_repo"}
        assert ctx.env == {
            "GITHUB_TOKEN": "ghp-0123456789",
            "GITHUB_API_BASE_URL": "https://ghe.example/api/v3",
        }


def test_a_context_needs_a_spec_or_a_compiled_plan():
    with pytest.raises(TypeError, match="needs a spec or a compiled plan"):
        build_run_context(run_id=1)


def test_a_run_paces_its_calls_unless_it_replays_offline(settings):
    settings.FLOWPILOT_RATE_LIMIT_BACKEND = "database"

    class Offline:
        offline = True

        def close(self) -> None:
            pass

    with build_run_context(run_id=1, spec=spec_of(REPO_STEP), env=ENV) as ctx:
        assert ctx.pacer is not None
    with build_run_context(run_id=1, spec=spec_of(REPO_STEP), env=ENV, taps=Offline()) as ctx:
        assert ctx.pacer is None  # a replay sends nothing
    settings.FLOWPILOT_RATE_LIMIT_BACKEND = "off"
    with build_run_context(run_id=1, spec=spec_of(REPO_STEP), env=ENV) as ctx:
        assert ctx.pacer is None
