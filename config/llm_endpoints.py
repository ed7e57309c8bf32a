"""Named LLM endpoints, read from the environment (django-environ).

``FLOWPILOT_LLM_ENDPOINTS=local,hosted`` names them; each then reads three variables,
its name upper-cased (``-`` becomes ``_``), and one more optional::

    FLOWPILOT_LLM_LOCAL_BASE_URL=http://127.0.0.1:11434/v1   # required
    FLOWPILOT_LLM_LOCAL_API_KEY=…                             # optional (a local server needs none)
    FLOWPILOT_LLM_LOCAL_MODEL=qwen2.5:14b                     # optional: PLANNER_MODEL otherwise
    FLOWPILOT_LLM_LOCAL_PRICES='{"qwen2.5:14b": [0, 0]}'      # optional: its own prices

``default`` is the endpoint of ``OPENAI_BASE_URL`` / ``OPENAI_API_KEY`` / ``PLANNER_MODEL``
and cannot be redefined. A name that is no slug, or a named endpoint without a base
URL, stops the process at start-up (``ImproperlyConfigured``) rather than at the
first step that needs it. The keys live only in settings: nothing stores or shows them.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from tools.llm.prices import Price, PriceError, parse_prices

ENDPOINT_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
DEFAULT_ENDPOINT = "default"


def endpoint_variable(name: str, suffix: str) -> str:
    """``FLOWPILOT_LLM_<NAME>_<SUFFIX>`` for an endpoint name."""
    return f"FLOWPILOT_LLM_{name.upper().replace('-', '_')}_{suffix}"


def read_prices(env: Any, variable: str) -> dict[str, Price]:
    """The price table in ``variable`` (JSON; empty: none), or ``ImproperlyConfigured``
    naming the variable and the entry."""
    try:
        return parse_prices(env.str(variable, default=""), variable)
    except PriceError as exc:
        raise ImproperlyConfigured(str(exc)) from None


def read_llm_endpoints(env: Any) -> dict[str, dict[str, Any]]:
    """The named endpoints ``{name: {"base_url", "api_key", "model", "prices"}}`` the environment
    declares (``env`` is a django-environ ``Env``), in the order listed."""
    names = [n.strip() for n in env.list("FLOWPILOT_LLM_ENDPOINTS", default=[]) if n.strip()]
    endpoints: dict[str, dict[str, Any]] = {}
    for name in names:
        if not re.match(ENDPOINT_NAME_PATTERN, name):
            raise ImproperlyConfigured(
                f"FLOWPILOT_LLM_ENDPOINTS: {name!r} is no endpoint name (lower-case letters, "
                "digits, `_` or `-`, starting with a letter, at most 32 characters)"
            )
        if name == DEFAULT_ENDPOINT or name in endpoints:
            raise ImproperlyConfigured(
                f"FLOWPILOT_LLM_ENDPOINTS: {name!r} is "
                + ("reserved for OPENAI_BASE_URL" if name == DEFAULT_ENDPOINT else "listed twice")
            )
        base_url = env.str(endpoint_variable(name, "BASE_URL"), default="").strip()
        if not base_url:
            raise ImproperlyConfigured(
                f"LLM endpoint {name!r} is listed in FLOWPILOT_LLM_ENDPOINTS but "
                f"{endpoint_variable(name, 'BASE_URL')} is not set"
            )
        endpoints[name] = {
            "base_url": base_url,
            "api_key": env.str(endpoint_variable(name, "API_KEY"), default=""),
            "model": env.str(endpoint_variable(name, "MODEL"), default="").strip(),
            "prices": read_prices(env, endpoint_variable(name, "PRICES")),
        }
    return endpoints
