"""Named LLM endpoints: which OpenAI-compatible server (and key, and default model) a
step or the planner talks to.

``default`` is ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``PLANNER_MODEL``; more are
declared in the environment (``config.llm_endpoints``) and land in the
``FLOWPILOT_LLM_ENDPOINTS`` setting. A step names one with ``endpoint: local``; the
validator refuses a name that is not configured (``endpoint_unknown``). Keys are read
here and handed to the client only: they are never stored or shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from tools.errors import FlowpilotError

DEFAULT_ENDPOINT = "default"


class LLMEndpointUnknown(FlowpilotError):
    """A step or the planner named an endpoint the installation does not configure."""

    code = "llm_endpoint_unknown"


@dataclass(frozen=True)
class LLMEndpoint:
    name: str
    base_url: str
    model: str
    api_key: str = field(default="", repr=False)  # never in a repr, a log or a page


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
    )
