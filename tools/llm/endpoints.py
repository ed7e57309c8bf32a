"""Named LLM endpoints: which OpenAI-compatible server (and key, and default model) a
step or the planner talks to.

``default`` is ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``PLANNER_MODEL``; more are
declared in the environment (``config.llm_endpoints``) and land in the
``FLOWPILOT_LLM_ENDPOINTS`` setting. A step names one with ``endpoint: local``; the
validator refuses a name that is not configured (``endpoint_unknown``). Keys are read
here and handed to the client only: they are never stored or shown. Each endpoint
carries its price table (``tools.llm.prices``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from tools.errors import FlowpilotError
from tools.llm.prices import PriceTable, price_table

DEFAULT_ENDPOINT = "default"
# The shipped ``OPENAI_BASE_URL``: a public service, which is never sent anything without
# a key (``llm_endpoint_ready``).
PUBLIC_BASE_URL = "https://openrouter.ai/api/v1"


class LLMEndpointError(FlowpilotError):
    """An LLM endpoint cannot be used as configured; nothing was sent to it."""

    code = "llm_endpoint_error"


class LLMEndpointUnknown(LLMEndpointError):
    """A step or the planner named an endpoint the installation does not configure."""

    code = "llm_endpoint_unknown"


class LLMNotConfigured(LLMEndpointError):
    """The default endpoint is the shipped public one and ``OPENAI_API_KEY`` is empty."""

    code = "llm_not_configured"


NOT_CONFIGURED_MESSAGE = (
    "no LLM is configured, so nothing was sent: set OPENAI_API_KEY (the key of {url}), "
    "or point OPENAI_BASE_URL at a server that needs no key, or declare one as a named "
    "endpoint (FLOWPILOT_LLM_ENDPOINTS=local, FLOWPILOT_LLM_LOCAL_BASE_URL=http://127.0.0.1:11434/v1)"
    " and set FLOWPILOT_PLANNER_ENDPOINT=local"
)


@dataclass(frozen=True)
class LLMEndpoint:
    name: str
    base_url: str
    model: str
    api_key: str = field(default="", repr=False)  # never in a repr, a log or a page
    prices: PriceTable = field(default_factory=price_table, repr=False)


def endpoint_names() -> list[str]:
    """``default`` and every configured name, in the configured order."""
    return [DEFAULT_ENDPOINT, *getattr(settings, "FLOWPILOT_LLM_ENDPOINTS", {})]


def llm_endpoint(name: str | None = None) -> LLMEndpoint:
    """The endpoint called ``name`` (``None`` or ``""``: default)."""
    if not name or name == DEFAULT_ENDPOINT:
        return LLMEndpoint(
            DEFAULT_ENDPOINT,
            settings.OPENAI_BASE_URL,
            settings.PLANNER_MODEL,
            settings.OPENAI_API_KEY,
            price_table(getattr(settings, "FLOWPILOT_LLM_PRICES", None)),
        )
    configured = getattr(settings, "FLOWPILOT_LLM_ENDPOINTS", {})
    if name not in configured:
        known = ", ".join(endpoint_names())
        raise LLMEndpointUnknown(
            f"LLM endpoint `{name}` is not configured (known: {known}); declare it in "
            "FLOWPILOT_LLM_ENDPOINTS with its FLOWPILOT_LLM_<NAME>_BASE_URL"
        )
    entry = configured[name]
    return LLMEndpoint(
        name,
        entry["base_url"],
        entry.get("model") or settings.PLANNER_MODEL,
        entry.get("api_key", ""),
        price_table(getattr(settings, "FLOWPILOT_LLM_PRICES", None), entry.get("prices")),
    )


def llm_endpoint_ready(name: str | None = None) -> LLMEndpoint:
    """The endpoint called ``name``, when something may be sent to it.

    The default endpoint left at the public ``PUBLIC_BASE_URL`` with no
    ``OPENAI_API_KEY`` is the state of a fresh installation, not a choice: a goal or a
    prompt sent there with no key leaks it and only comes back 401. That raises
    ``LLMNotConfigured`` saying what to set. An ``OPENAI_BASE_URL`` set to another
    server, or a named endpoint, is an explicit choice and may be keyless (a local server).
    """
    chosen = llm_endpoint(name)
    public = chosen.base_url.rstrip("/") == PUBLIC_BASE_URL
    if chosen.name == DEFAULT_ENDPOINT and public and not chosen.api_key:
        raise LLMNotConfigured(NOT_CONFIGURED_MESSAGE.format(url=PUBLIC_BASE_URL))
    return chosen
