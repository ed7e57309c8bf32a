"""Environment access is declared: a workflow reads only the variables it may read.

A ``$env.NAME`` reference is allowed when a tool of the workflow's allowlist
declares ``NAME`` as its configuration (one of its ``{{env.NAME}}`` references or
its ``secret_env``), or when the operator allows it in ``FLOWPILOT_ENV_ALLOW``
(comma-separated names or shell-style globs such as ``REPORT_*``). Anything else —
``$env.DJANGO_SECRET_KEY``, ``$env.OPENAI_API_KEY`` — is an ``env_not_allowed``
error naming the variable and how to allow it. The engine applies the same rule
when it builds a run's environment, so a definition edited after validation
still cannot read another variable.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from fnmatch import fnmatchcase
from typing import Any

from django.conf import settings

from workflows.references import EnvRef
from workflows.validation.context import FlowContext
from workflows.validation.report import ValidationIssue, error


def env_allowlist() -> tuple[str, ...]:
    """The operator's allowlist (``FLOWPILOT_ENV_ALLOW``): names or globs."""
    return tuple(getattr(settings, "FLOWPILOT_ENV_ALLOW", ()))


def declared_env_names(tools: Iterable[Any]) -> frozenset[str]:
    """The env variables ``tools`` declare as configuration (``None`` entries skipped)."""
    names: set[str] = set()
    for tool in tools:
        env_names = getattr(tool, "env_names", None)
        if callable(env_names):
            names |= set(env_names())
    return frozenset(names)


def env_name_allowed(name: str, *, declared: frozenset[str], allow: Sequence[str]) -> bool:
    return name in declared or any(fnmatchcase(name, pattern) for pattern in allow)


def allowed_env(
    env: Mapping[str, str], *, declared: frozenset[str], allow: Sequence[str]
) -> dict[str, str]:
    """The part of ``env`` a run may read (the rest is never in the run's context).

    Without a glob in ``allow`` the allowed names are looked up one by one: a run (each
    Celery step task builds one) then never walks, nor decodes, the whole environment.
    """
    if not any(_GLOB.intersection(pattern) for pattern in allow):
        names = sorted(declared.union(allow))
        return {name: env[name] for name in names if name in env}
    return {
        name: value
        for name, value in sorted(env.items())
        if env_name_allowed(name, declared=declared, allow=allow)
    }


_GLOB = frozenset("*?[")  # what makes an ``fnmatchcase`` pattern more than a name


def check_env_access(
    ctx: FlowContext, *, allow: Sequence[str] | None = None
) -> list[ValidationIssue]:
    """One ``env_not_allowed`` error per ``$env`` reference no tool declares nor the
    operator allows. Skipped without a registry (schema-only validation); outputs and
    LLM-fed steps are refused ``$env`` altogether by the reference checks."""
    if ctx.registry is None:
        return []
    allow = env_allowlist() if allow is None else allow
    declared = declared_env_names(ctx.tool(name) for name in sorted(ctx.allowed_tools()))
    issues: list[ValidationIssue] = []
    for leaf in ctx.leaves():
        if not isinstance(leaf.value, EnvRef) or leaf.step_index is None:
            continue
        step = ctx.spec.steps[leaf.step_index]
        name = leaf.value.name
        if step.needs_llm() or env_name_allowed(name, declared=declared, allow=allow):
            continue
        message = (
            f"step `{step.id}` reads `{leaf.value}`, but no tool of this workflow declares "
            f"`{name}` as its configuration; to allow it, an operator adds `{name}` to "
            "FLOWPILOT_ENV_ALLOW (comma-separated names or globs)"
        )
        issues.append(error("env_not_allowed", leaf.path, message, step.id))
    return issues
