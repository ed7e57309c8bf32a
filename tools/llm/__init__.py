"""The LLM client shared by the planner and the ``llm``/decision steps (bottom layer).

``LLMClient(base_url, api_key, model, timeout, max_retries)`` or
``LLMClient.from_settings()``; ``chat(messages, tools=…, response_format=…)``
returns an ``LLMReply``. Errors are typed and carry their retryability.

The names load with the first use of one (PEP 562), not with the package: the settings
read ``tools.llm.endpoints`` at every start, and the client (with ``pydantic``'s
models of the retry policy) is only for a process that talks to a model.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tools.llm.client import ChatTap, LLMClient, LLMReply, ToolCall, Usage
    from tools.llm.content import parse_json_reply
    from tools.llm.endpoints import (
        DEFAULT_ENDPOINT,
        LLMEndpointError,
        LLMEndpointUnknown,
        LLMNotConfigured,
        endpoint_names,
        llm_endpoint,
        llm_endpoint_ready,
    )
    from tools.llm.errors import (
        LLMAuthFailed,
        LLMError,
        LLMRateLimited,
        LLMReplyInvalid,
        LLMTimeout,
        LLMUnavailable,
    )
    from tools.llm.prices import Price, PriceTable, price_table

# Each public name, and the module it is defined in.
_HOMES = {
    "ChatTap": "tools.llm.client",
    "LLMClient": "tools.llm.client",
    "LLMReply": "tools.llm.client",
    "ToolCall": "tools.llm.client",
    "Usage": "tools.llm.client",
    "parse_json_reply": "tools.llm.content",
    "Price": "tools.llm.prices",
    "PriceTable": "tools.llm.prices",
    "price_table": "tools.llm.prices",
    "DEFAULT_ENDPOINT": "tools.llm.endpoints",
    "LLMEndpointError": "tools.llm.endpoints",
    "LLMEndpointUnknown": "tools.llm.endpoints",
    "LLMNotConfigured": "tools.llm.endpoints",
    "endpoint_names": "tools.llm.endpoints",
    "llm_endpoint": "tools.llm.endpoints",
    "llm_endpoint_ready": "tools.llm.endpoints",
    "LLMAuthFailed": "tools.llm.errors",
    "LLMError": "tools.llm.errors",
    "LLMRateLimited": "tools.llm.errors",
    "LLMReplyInvalid": "tools.llm.errors",
    "LLMTimeout": "tools.llm.errors",
    "LLMUnavailable": "tools.llm.errors",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'tools.llm' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)


__all__ = [
    "DEFAULT_ENDPOINT",
    "ChatTap",
    "LLMAuthFailed",
    "LLMClient",
    "LLMEndpointError",
    "LLMEndpointUnknown",
    "LLMError",
    "LLMNotConfigured",
    "LLMRateLimited",
    "LLMReply",
    "LLMReplyInvalid",
    "LLMTimeout",
    "LLMUnavailable",
    "Price",
    "PriceTable",
    "ToolCall",
    "Usage",
    "endpoint_names",
    "llm_endpoint",
    "llm_endpoint_ready",
    "parse_json_reply",
    "price_table",
]
