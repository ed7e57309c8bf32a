"""The LLM client shared by the planner and the ``llm``/decision steps (bottom layer).

``LLMClient(base_url, api_key, model, timeout, max_retries)`` or
``LLMClient.from_settings()``; ``chat(messages, tools=…, response_format=…)``
returns an ``LLMReply``. Errors are typed and carry their retryability.
"""

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
    "ToolCall",
    "Usage",
    "endpoint_names",
    "llm_endpoint",
    "llm_endpoint_ready",
    "parse_json_reply",
]
