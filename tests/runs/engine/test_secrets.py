"""runs.engine.secrets and the run's environment: declared secrets, declared access."""

from __future__ import annotations

import pytest

from runs.engine.secrets import inputs_refuse_secrets
from runs.models import Run
from runs.services import run_create
from tests.conftest import import_example
from tools.registry import ToolRegistry
from workflows.inputs import InputsInvalid

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("example_tools")]


def test_inputs_refuse_secrets_names_each_input_holding_a_declared_secret():
    env = {"GITHUB_TOKEN": "ghp-0123456789", "GITHUB_API_BASE_URL": "https://ghe.example/api/v3"}
    inputs = {"base": "https://ghe.example/api/v3", "note": ["see ghp-0123456789"], "n": 3}

    with pytest.raises(InputsInvalid) as caught:
        inputs_refuse_secrets(inputs=inputs, registry=ToolRegistry.from_db(), env=env)

    assert [p.split("`")[1] for p in caught.value.problems] == ["note"]


def test_inputs_a_person_typed_are_refused_for_a_token_shape_too_run_inputs_are_not():
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJib3QifQ.c2lnbmF0dXJlLXZhbHVl"
    inputs = {"note": {"auth": f"Bearer {jwt}"}, "n": 3, "word": "sk-learn"}

    inputs_refuse_secrets(inputs=inputs, registry=ToolRegistry.from_db(), env={})
    with pytest.raises(InputsInvalid) as caught:
        inputs_refuse_secrets(
            inputs=inputs, registry=ToolRegistry.from_db(), env={}, token_shapes=True
        )

    assert caught.value.problems == [
        "input `note` holds the value of a secret (a tool credential, or a token); "
        "credentials are configured in the tool's environment, never passed as run inputs"
    ]


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
