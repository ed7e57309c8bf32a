"""The run's secrets: which values are masked, and the one place a secret is refused.

Secrets are declared by tools (``ToolSpec.secret_env_names``); a run's redactor
holds the values of every registered tool's secret env variables from the start,
and the HTTP client adds each credential it sends. Run inputs are data the run
reads back, so they cannot be stored masked: a run input holding a secret value is
refused instead (a credential belongs in a tool's configuration).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.redaction import Redactor
from tools.registry import ToolRegistry
from workflows.inputs import InputsInvalid


def run_redactor(registry: ToolRegistry, env: Mapping[str, str]) -> Redactor:
    """A redactor holding the value of every env variable a registered tool declares
    secret, so a secret is masked in whatever is stored or shown, whichever step or
    ``$env`` mapping carried it. Non-secret configuration is not registered."""
    redactor = Redactor()
    for name in sorted(registry.names()):
        spec = registry.get(name)
        for env_name in sorted(spec.secret_env_names() if spec is not None else ()):
            redactor.add_secret(env.get(env_name))
    return redactor


def inputs_refuse_secrets(*, inputs: Mapping[str, Any], redactor: Redactor) -> None:
    """Raise ``InputsInvalid`` naming each run input that holds a secret value."""
    problems = [
        f"input `{name}` holds the value of a secret (a tool credential); credentials "
        "are configured in the tool's environment, never passed as run inputs"
        for name, value in sorted(inputs.items())
        if redactor.scrub(value) != value
    ]
    if problems:
        raise InputsInvalid(problems)
