"""Every tool a step calls or offers can read its stored credential.

A tool whose auth names a stored credential (``auth: {credential: github_app}``,
docs/credentials.md) fails each call while no credential has that name; the validator
says so first (``credential_unknown``), naming the step, the tool and the credential,
with the closest stored name. The names are read from the database once per
validation, and only when a step uses such a tool.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from typing import Any, Protocol

from workflows.validation.report import ValidationIssue, error


class CredentialLookup(Protocol):
    def names(self) -> Collection[str]:
        """The names of the stored credentials."""
        ...


class StoredCredentialNames:
    """The credentials' names, read from the database when first asked."""

    def __init__(self) -> None:
        self._names: frozenset[str] | None = None

    def names(self) -> frozenset[str]:
        if self._names is None:
            from tools.credentials.store import credential_names  # the models: at use

            self._names = frozenset(credential_names())
        return self._names


def tool_credential(tool: Any) -> str | None:
    """The stored credential ``tool`` names, if any (a ``ToolSpec``'s
    ``credential_name()``; a lookup's tools may have none)."""
    method = getattr(tool, "credential_name", None)
    return method() if callable(method) else None


def check_credentials(ctx: Any) -> list[ValidationIssue]:
    """One ``credential_unknown`` error per step use of a tool whose credential does
    not exist (``ctx`` is a ``FlowContext`` with its ``credentials`` lookup)."""
    if ctx.registry is None or ctx.credentials is None:
        return []
    issues = []
    for index, step in enumerate(ctx.spec.steps):
        direct = [(f"steps[{index}].tool", name) for name in step.direct_tools()]
        offered = [(f"steps[{index}].tools[{k}]", n) for k, n in enumerate(step.model_tools())]
        for path, name in direct + offered:
            wanted = tool_credential(ctx.tool(name))
            if wanted is None:
                continue
            known = ctx.credentials.names()
            if wanted in known:
                continue
            close = difflib.get_close_matches(wanted, sorted(known), n=1, cutoff=0.6)
            hint = f" (did you mean `{close[0]}`?)" if close else ""
            message = (
                f"step `{step.id}` uses tool `{name}`, whose credential `{wanted}` does not "
                f"exist{hint}; create it in the admin (Credentials) or fix the tool's "
                "`auth: {credential: …}`"
            )
            issues.append(error("credential_unknown", path, message, step.id))
    return issues
