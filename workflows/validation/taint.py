"""The taint rule: a credential goes only into the credential slot of a tool.

A credential is an env variable that a tool of the registry declares secret — read by
its auth, by a secret header or query parameter, or listed in ``secret_env``
(``tools.secrets``, the one home of that rule). Masking by value cannot catch a
value derived from one (a transform that slices, encodes or reshapes it), so the
only place a workflow may map ``$env.NAME`` of a credential is a parameter of a
tool (or foreach) step that the tool's own secret templates read: its *credential
slot* (``tools.secrets.credential_params``: ``token: "{{token}}"`` in its auth, a
secret header ``"{{signature}}"``). Mapped anywhere else — a transform, a
decision's conditions, a foreach's ``items``, a child workflow's input, another
parameter of a tool, nested inside a parameter — it is a ``credential_leak`` error
naming the step and the path, and saying to give the tool the credential through
its auth. Text that names a credential (``"Bearer $env.TOKEN"``,
``"{{env.TOKEN}}"``) is refused the same way, so the fix offered for a reference
inside text is never to map the credential alone.

What is refused elsewhere is not repeated here: any ``$env`` in a step whose values
reach an LLM is ``env_in_prompt``, and in the workflow outputs ``env_in_output``
(``reference_checks``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from workflows.graph import iter_leaves
from workflows.references import EnvRef, Literal
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error, format_path, names

# ``$env.NAME`` or ``{{env.NAME}}`` (``{{env.NAME:-default}}`` too) inside text
_ENV_IN_TEXT = re.compile(
    r"(?<![\w$])\$env\.([A-Za-z_][A-Za-z0-9_]*)|\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)"
)
_KIND_PLACES = {
    "transform": "a transform",
    "decision": "a decision",
    "workflow": "an input of the child workflow",
}


def check_credential_flow(ctx: FlowContext) -> list[ValidationIssue]:
    """One ``credential_leak`` error per credential mapped outside a credential slot.
    Skipped without a registry (nothing says what is a credential)."""
    if ctx.registry is None:
        return []
    owners = credential_owners(ctx)
    if not owners:
        return []
    issues: list[ValidationIssue] = []
    for index, step in enumerate(ctx.spec.steps):
        if step.needs_llm():  # every `$env` there is `env_in_prompt` already
            continue
        for field, mapping in ctx.parsed[index].items():
            for param, parsed in mapping.items():
                for path, name in _credentials_read(parsed, owners):
                    slot = _slot(ctx, step, field, param, nested=len(path) > 0)
                    if slot is None:
                        continue
                    where = format_path((param, *path), f"steps[{index}].{field}")
                    message = _message(step, name, owners[name], slot)
                    issues.append(error("credential_leak", where, message, step.id))
    return issues


def credential_owners(ctx: FlowContext) -> dict[str, list[str]]:
    """Each credential (an env variable a tool declares secret) → the tools declaring it.

    Every tool of the registry counts when it can list them, else those the workflow
    names; a tool without ``secret_env_names`` declares none."""
    tools = set(ctx.tool_names()) | set(ctx.allowed_tools())
    for step in ctx.spec.steps:
        tools |= set(step.direct_tools()) | set(step.model_tools())
    owners: dict[str, list[str]] = {}
    for name in sorted(tools):
        secret = getattr(ctx.tool(name), "secret_env_names", None)
        for env_name in sorted(secret()) if callable(secret) else ():
            owners.setdefault(env_name, []).append(name)
    return owners


def _credentials_read(parsed: Any, owners: dict[str, list[str]]) -> Iterator[tuple[tuple, str]]:
    """``(path inside the parameter, credential name)`` of every credential a parsed
    mapping value reads: a ``$env`` reference, or a mention inside literal text."""
    for path, leaf in iter_leaves(parsed):
        if isinstance(leaf, EnvRef) and leaf.name in owners:
            yield path, leaf.name
        elif isinstance(leaf, Literal) and isinstance(leaf.value, str) and "env." in leaf.value:
            for match in _ENV_IN_TEXT.finditer(leaf.value):
                name = match.group(1) or match.group(2)
                if name in owners:
                    yield path, name
                    break


def _slot(ctx: FlowContext, step: Any, field: str, param: str, *, nested: bool) -> str | None:
    """Where the value would go, described — or ``None`` when it is a credential slot."""
    kind = step.kind
    if kind in ("tool", "foreach"):
        if kind == "foreach" and field == "input_mapping" and param == "items":
            return "the list a foreach runs over (`items`)"
        tool = ctx.tool(step.tool)
        params = getattr(tool, "credential_params", None)
        slots = params() if callable(params) else frozenset()
        if param in slots and not nested:
            return None
        where = f"part of parameter `{param}`" if nested else f"parameter `{param}`"
        if slots:
            return f"{where} of tool `{step.tool}`, whose credential slot is {names(slots)}"
        return f"{where} of tool `{step.tool}`, which takes no credential in its arguments"
    return _KIND_PLACES.get(kind, f"a {kind} step")


def _message(step: Any, name: str, tools: list[str], slot: str) -> str:
    owner = "tool " + ", ".join(f"`{t}`" for t in tools[:3])
    if len(tools) > 3:
        owner += f" and {len(tools) - 3} more"
    return (
        f"step `{step.id}` maps `$env.{name}`, the credential of {owner}, into {slot}: a "
        "credential may be mapped only into a tool's credential slot, because a value "
        "derived from it cannot be masked; drop this mapping and give the tool the "
        f'credential through its auth (`auth: {{type: bearer, token: "{{{{env.{name}}}}}"}}` '
        "in the tool definition, which reads it from the environment)"
    )
