"""What is secret: the one rule every copy that is stored or shown is masked by.

A value is secret because a tool definition declares it, never because of the data
or of a key's name (docs/security.md):

- the auth credential: a bearer token, an API-key value, a basic password (and the
  base64 ``user:password`` token sent for it), an OAuth2 client secret and refresh
  token (and the base64 ``client_id:client_secret`` sent to the token endpoint);
- the values of the headers and query parameters a tool declares secret
  (``request.secret_headers`` / ``secret_query``, an MCP server's ``secret_headers``);
- the values of the env variables listed in ``secret_env``, and of every env
  variable one of the templates above reads;
- every value of every stored credential a tool names (``auth: {credential: NAME}``),
  decrypted or read from HashiCorp Vault (:mod:`tools.credentials.vault`), and the
  base64 ``user:password`` sent for a basic or OAuth2 client one.

Everything else a tool reads from the environment (a base URL, an org name, a
region) is configuration: it is stored and shown in clear, by every surface alike.

The rule is applied at two moments, with the same code:

- **before anything is sent** (:func:`redactor_for`, :func:`secret_values`): the
  values every :class:`SecretSource` knows now. The engine's run redactor, the
  check that refuses a run input holding a secret, the planner's prompts and the
  failure report all start from it, so they mask exactly the same values.
- **while a call is made** (:func:`register_tool_secrets`, and
  :meth:`~tools.redaction.Redactor.add_secret` for what only then exists: a
  credential rendered with the call's arguments, an OAuth2 access token).

Where the values come from is pluggable: a :class:`SecretSource` yields secret
values. :class:`DeclaredSecrets` (the tools of a registry, read from an env
mapping) and :class:`tools.credentials.store.StoredCredentials` (the stored
credentials those tools name, decrypted) are the sources; :func:`secret_sources` is the one place a
source joins. How a value is masked is :class:`tools.redaction.Redactor`.

Two more rules live here, because they ask the same question (what is secret):

- **where a credential may go** (:func:`credential_env_names`,
  :func:`credential_params`): an env variable a tool declares secret may be mapped
  by a workflow only into a tool's credential slot, the arguments its secret
  templates read; the validator's taint check (``workflows.validation.taint``)
  applies it.
- **free text people type** (a planner goal, reviewer feedback, answers, sample
  inputs): it declares nothing, so besides the known values it is searched for
  obvious token shapes (:data:`TOKEN_PATTERNS`, :func:`token_values`), and what
  is found is masked by value like any other secret (:func:`free_text_redactor`).
  Run data in flight and tool responses are never searched for shapes.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from tools.errors import TemplateError
from tools.mcp.config import McpServer, McpToolConfig
from tools.redaction import Redactor, basic_token
from tools.spec_request import HttpAuth, HttpRequest, env_refs
from tools.templating import iter_strings, placeholders, render_text


class SecretSource(Protocol):
    """Anything that knows secret values (declared tool secrets; a credential store)."""

    def values(self) -> Iterable[str]:
        """Every secret value this source knows now (empty strings are ignored)."""
        ...


class HttpLike(Protocol):
    """What the rule reads of an http tool's configuration."""

    @property
    def auth(self) -> HttpAuth: ...

    @property
    def request(self) -> HttpRequest: ...


class ToolSpec(Protocol):
    """What the rule reads of a tool definition (``tools.spec.ToolSpec`` is one; the
    rule is below the spec, which asks it for its secret env names)."""

    @property
    def http(self) -> HttpLike | None: ...

    @property
    def mcp(self) -> McpToolConfig | None: ...

    @property
    def secret_env(self) -> list[str]: ...

    def secret_env_names(self) -> frozenset[str]: ...


class ToolSpecs(Protocol):
    """What the rule reads of a registry: its tool names and their specs."""

    def names(self) -> list[str]: ...

    def get(self, name: str) -> ToolSpec | None: ...


def secret_templates(spec: ToolSpec) -> list[Any]:
    """Every template ``spec`` declares secret: its auth credential, its secret
    headers and query parameters, its MCP server's secret headers."""
    found: list[Any] = []
    if spec.http is not None:
        auth = spec.http.auth
        credentials = (auth.token, auth.value, auth.password, auth.client_secret,
                       auth.refresh_token)  # fmt: skip
        found += [t for t in credentials if t]
        found += spec.http.request.secret_templates()
    if spec.mcp is not None:
        found += spec.mcp.server.secret_header_templates()
    return found


def secret_env_names(spec: ToolSpec) -> frozenset[str]:
    """The env variables whose values are secret: listed in ``secret_env`` or read by
    one of :func:`secret_templates` (``ToolSpec.secret_env_names`` caches this)."""
    return frozenset(spec.secret_env) | env_refs(secret_templates(spec))


def credential_params(spec: ToolSpec) -> frozenset[str]:
    """The call arguments ``spec``'s secret templates read: its *credential slot*.

    A bearer ``token: "{{token}}"`` or a secret header ``"{{signature}}"`` takes its
    value from the call's arguments; those arguments (their top-level names) are the
    only place a workflow may map a credential to (``ToolSpec.credential_params``
    caches this). A tool whose credentials all read the environment has none."""
    names: set[str] = set()
    for text in iter_strings(secret_templates(spec)):
        try:
            found = placeholders(text)
        except TemplateError:  # checked when the spec was built; a stored spec may be older
            continue
        names.update(p.path[0] for p in found if not p.is_env and p.path)
    return frozenset(names)


def credential_env_names(tools: ToolSpecs) -> frozenset[str]:
    """Every env variable a tool of ``tools`` declares secret (its credentials)."""
    names: set[str] = set()
    for name in tools.names():
        spec = tools.get(name)
        if spec is not None:
            names |= spec.secret_env_names()
    return frozenset(names)


def tool_secret_values(spec: ToolSpec, env: Mapping[str, str]) -> list[str]:
    """The values ``spec`` declares secret, read from ``env``: its secret env
    variables, and each secret template that reads only ``env`` rendered (a header
    ``Bearer {{env.T}}``, a basic ``user:password`` token). A template that also
    reads the call's arguments is resolved when the call is made."""
    found = [env.get(name, "") for name in sorted(spec.secret_env_names())]
    found += [_resolved(template, env) or "" for template in secret_templates(spec)]
    if spec.http is not None:
        found += _basic_tokens(spec.http.auth, env)
    return [value for value in found if value]


def server_secret_values(server: McpServer, env: Mapping[str, str]) -> list[str]:
    """An MCP server's secret values: its secret headers rendered, its ``secret_env``."""
    headers = [_resolved(t, env) or "" for t in server.secret_header_templates()]
    values = headers + [env.get(name, "") for name in sorted(server.secret_env)]
    return [value for value in values if value]


def _basic_tokens(auth: HttpAuth, env: Mapping[str, str]) -> list[str]:
    pairs = {"basic": (auth.username, auth.password),
             "oauth2": (auth.client_id, auth.client_secret)}  # fmt: skip
    if auth.type not in pairs:
        return []
    user_template, password_template = pairs[auth.type]
    user = _resolved(user_template, env) if user_template else ""
    password = _resolved(password_template, env)
    return [basic_token(user, password)] if password and user is not None else []


def _resolved(template: Any, env: Mapping[str, str]) -> str | None:
    """``template`` rendered with ``env`` when it reads nothing else (else None)."""
    if not isinstance(template, str) or not template:
        return None
    kind, name = _template_kind(template)
    if kind == "bare":  # exactly ``{{env.NAME}}``: no rendering needed
        return env.get(name or "")
    if kind == "env":
        return render_text(template, {}, env=env)
    return template if kind == "literal" else None


@functools.lru_cache(maxsize=4096)
def _template_kind(template: str) -> tuple[str, str | None]:
    """``literal`` (no placeholder), ``bare`` (``{{env.NAME}}`` alone, with its name),
    ``env`` (reads only the environment), or ``call`` (reads a call's arguments, or is
    malformed). A pure function of the text, cached: every run asks it for every
    template of every registered tool."""
    try:
        found = placeholders(template)
    except TemplateError:  # checked when the spec was built; a stored spec may be older
        return "call", None
    if not found:
        return "literal", None
    if not all(p.is_env for p in found):
        return "call", None
    only = found[0]
    if len(found) == 1 and only.default is None and template == "{{" + only.raw + "}}":
        return "bare", only.env_name
    return "env", None


@dataclass(frozen=True)
class DeclaredSecrets:
    """The secrets the tools of ``tools`` declare, their values read from ``env``."""

    tools: ToolSpecs
    env: Mapping[str, str]

    def values(self) -> list[str]:
        found: list[str] = []
        for name in self.tools.names():
            spec = self.tools.get(name)
            if spec is not None:
                found += tool_secret_values(spec, self.env)
        return found


def secret_sources(tools: ToolSpecs, env: Mapping[str, str]) -> list[SecretSource]:
    """Where secret values come from: the tools' declarations, and the credential
    store (every value of every stored credential a tool of ``tools`` names, decrypted:
    docs/credentials.md), so every user of :func:`redactor_for` masks them. With no
    tool naming a credential the store is not read."""
    from tools.credentials.store import StoredCredentials  # the models: after app loading

    return [DeclaredSecrets(tools, env), StoredCredentials(names=credential_names(tools))]


def credential_names(tools: ToolSpecs) -> frozenset[str]:
    """The stored credentials the tools of ``tools`` name (``auth: {credential: NAME}``)."""
    found = set()
    for name in tools.names():
        spec = tools.get(name)
        if spec is not None and spec.http is not None and spec.http.auth.credential:
            found.add(spec.http.auth.credential)
    return frozenset(found)


def secret_values(tools: ToolSpecs, env: Mapping[str, str]) -> list[str]:
    """Every secret value known before a call is made, sorted, each once."""
    return sorted({v for source in secret_sources(tools, env) for v in source.values() if v})


def redactor_for(tools: ToolSpecs, env: Mapping[str, str]) -> Redactor:
    """A new redactor holding :func:`secret_values`: a run's from its start, the
    planner's, the failure report's. Non-secret configuration is not registered."""
    return Redactor(secret_values(tools, env))


def register_tool_secrets(redactor: Redactor, spec: ToolSpec, env: Mapping[str, str]) -> None:
    """Have ``redactor`` mask what ``spec`` declares secret (before a call is made)."""
    for value in tool_secret_values(spec, env):
        redactor.add_secret(value)


def register_server_secrets(redactor: Redactor, server: McpServer, env: Mapping[str, str]) -> None:
    """Have ``redactor`` mask an MCP server's secret values (before it is opened)."""
    for value in server_secret_values(server, env):
        redactor.add_secret(value)


# --- free text ----------------------------------------------------------------------

# Obvious token shapes, for free text only (see the module docstring). Each starts at
# a boundary (no ASCII letter or digit before it), so a match is tried once per run of
# token characters and the search stays linear on any input; quantifiers are bounded
# from below only and never nested. The group ``token`` is what is masked.
_BOUNDARY = r"(?<![A-Za-z0-9])"
TOKEN_PATTERNS: dict[str, re.Pattern[str]] = {
    name: re.compile(pattern)
    for name, pattern in {
        # OpenAI (sk-..., sk-proj-..., sk-svcacct-...), Anthropic (sk-ant-...)
        "openai": rf"{_BOUNDARY}(?P<token>sk-[A-Za-z0-9_-]{{20,}})",
        # Stripe secret and restricted keys
        "stripe": rf"{_BOUNDARY}(?P<token>(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{{16,}})",
        # GitHub personal, OAuth, user-to-server, server-to-server and refresh tokens
        "github": rf"{_BOUNDARY}(?P<token>gh[pousr]_[A-Za-z0-9]{{30,}})",
        "github_pat": rf"{_BOUNDARY}(?P<token>github_pat_[A-Za-z0-9_]{{30,}})",
        # Slack bot, app, user, refresh and config tokens
        "slack": rf"{_BOUNDARY}(?P<token>xox[abposr]-[A-Za-z0-9-]{{10,}})",
        # AWS access key ids (long-lived and temporary)
        "aws": rf"{_BOUNDARY}(?P<token>(?:AKIA|ASIA)[0-9A-Z]{{16}})(?![0-9A-Za-z])",
        # Google API keys
        "google": rf"{_BOUNDARY}(?P<token>AIza[0-9A-Za-z_-]{{35}})",
        # a JSON Web Token: three base64url parts, the first a JSON object ("eyJ")
        "jwt": rf"{_BOUNDARY}(?P<token>eyJ[A-Za-z0-9_-]{{8,}}\.[A-Za-z0-9_-]{{8,}}"
        rf"\.[A-Za-z0-9_-]{{8,}})",
        # whatever follows "Bearer " when it is long enough to be a token
        "bearer": r"(?<![A-Za-z0-9])[Bb]earer[ \t]+(?P<token>[A-Za-z0-9._~+/=-]{20,})",
    }.items()
}


def token_values(text: str) -> list[str]:
    """Every substring of ``text`` shaped like a credential (:data:`TOKEN_PATTERNS`),
    each once, in the order found."""
    if not isinstance(text, str) or not text:
        return []
    found: dict[str, None] = {}
    for pattern in TOKEN_PATTERNS.values():
        for match in pattern.finditer(text):
            found[match.group("token")] = None
    return list(found)


def free_text_redactor(tools: ToolSpecs, env: Mapping[str, str], *texts: Any) -> Redactor:
    """A redactor for free text people type: :func:`redactor_for`'s values, every value
    of every stored credential (whether a tool names it yet or not), and every
    token-shaped value found in ``texts`` (strings, or data whose strings and keys are
    searched). Its ``scrub``/``scrub_text`` mask each by value, wherever it recurs."""
    from tools.credentials.store import StoredCredentials  # the models: after app loading

    redactor = redactor_for(tools, env)
    for value in StoredCredentials().values():
        redactor.add_secret(value)
    for text in iter_strings(list(texts)):
        for value in token_values(text):
            redactor.add_secret(value)
    return redactor
