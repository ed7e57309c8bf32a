"""runs.engine.secrets and the run's environment: declared secrets, declared access."""

from __future__ import annotations

import pytest

from runs.engine.build import build_run_context
from runs.engine.resolve import resolve_step_call
from runs.engine.secrets import inputs_refuse_secrets
from runs.models import Run
from runs.services import run_create
from tests.conftest import import_example
from tools.registry import ToolRegistry
from workflows.inputs import InputsInvalid
from workflows.schema import WorkflowSpec

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("example_tools")]


def test_the_run_redactor_holds_declared_secrets_only():
    env = {"GITHUB_TOKEN": "ghp-0123456789", "GITHUB_API_BASE_URL": "https://ghe.example/api/v3"}
    spec = WorkflowSpec.model_validate(
        {"name": "probe", "steps": [{"id": "r", "kind": "tool", "tool": "github_repo",
          "input_mapping": {"owner": "$input.o", "repo": "$input.r"}}]}
    )  # fmt: skip
    with build_run_context(run_id=1, spec=spec, env=env) as ctx:
        text = "ghp-0123456789 at https://ghe.example/api/v3"
        assert ctx.redactor.scrub_text(text) == "*** at https://ghe.example/api/v3"


def test_inputs_refuse_secrets_names_each_input_holding_a_declared_secret():
    env = {"GITHUB_TOKEN": "ghp-0123456789", "GITHUB_API_BASE_URL": "https://ghe.example/api/v3"}
    inputs = {"base": "https://ghe.example/api/v3", "note": ["see ghp-0123456789"], "n": 3}

    with pytest.raises(InputsInvalid) as caught:
        inputs_refuse_secrets(inputs=inputs, registry=ToolRegistry.from_db(), env=env)

    assert [p.split("`")[1] for p in caught.value.problems] == ["note"]


def test_a_run_input_holding_a_secret_value_is_refused(monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-s3cr3t-4f5e6d")
    workflow = import_example("github_intel")

    with pytest.raises(InputsInvalid) as caught:
        run_create(
            workflow=workflow,
            trigger="cli",
            inputs={"owner": "octo-org", "repo": "token ghp-s3cr3t-4f5e6d"},
        )

    assert caught.value.problems == [
        "input `repo` holds the value of a secret (a tool credential); credentials are "
        "configured in the tool's environment, never passed as run inputs"
    ]
    assert Run.objects.count() == 0


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
