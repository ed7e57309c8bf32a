"""The one place a secret is refused: a run input holding a secret value.

What is secret is decided by ``tools.secrets`` (the engine's run redactor is its
``redactor_for``). Run inputs are data the run reads back, so they cannot be stored
masked: a run input holding a secret value is refused instead (a credential belongs
in a tool's configuration). Run creation, child runs and review approvals call it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tools.secrets import ToolSpecs, free_text_redactor, redactor_for
from workflows.inputs import InputsInvalid


def inputs_refuse_secrets(
    *,
    inputs: Mapping[str, Any],
    registry: ToolSpecs,
    env: Mapping[str, str],
    token_shapes: bool = False,
) -> None:
    """Raise ``InputsInvalid`` naming each run input that holds a value ``registry``'s
    tools declare secret (read from ``env``). With ``token_shapes`` (inputs a person
    typed: a review's sample inputs) a token-shaped value (``tools.secrets.token_values``:
    ``ghp_…``, ``sk-…``, a JWT …) is refused too."""
    if token_shapes:
        redactor = free_text_redactor(registry, env, dict(inputs))
    else:
        redactor = redactor_for(registry, env)
    what = "a tool credential, or a token" if token_shapes else "a tool credential"
    problems = [
        f"input `{name}` holds the value of a secret ({what}); credentials are configured "
        "in the tool's environment, never passed as run inputs"
        for name, value in sorted(inputs.items())
        if redactor.scrub(value) != value
    ]
    if problems:
        raise InputsInvalid(problems)
