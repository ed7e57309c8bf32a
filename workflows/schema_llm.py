"""How an LLM-using step (``llm``, the LLM form of ``decision``) calls its model: its
endpoint, model and sampling options, and an ``llm`` step's budget.
``workflows.schema`` carries them on its step models.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from workflows.schema_triggers import FrozenModel


class LLMBudget(FrozenModel):
    max_tokens: int | None = Field(None, ge=1)
    max_calls: int | None = Field(None, ge=1)
    max_tool_calls: int | None = Field(None, ge=0)


ENDPOINT_NAME_PATTERN = r"^[a-z][a-z0-9_-]{0,31}$"
MAX_SEED = 2**31 - 1


class LLMSettings(FrozenModel):
    """How an LLM-using step calls its model: which endpoint and model, and the sampling
    options sent with every call (omitted: the endpoint's own defaults)."""

    endpoint: str | None = Field(
        None,
        pattern=ENDPOINT_NAME_PATTERN,
        description="A named LLM endpoint (FLOWPILOT_LLM_ENDPOINTS); omitted: default.",
    )
    model: str | None = Field(None, min_length=1, max_length=200)
    temperature: float | None = Field(None, ge=0, le=2)
    max_output_tokens: int | None = Field(
        None, ge=1, le=1_000_000, description="Sent as `max_tokens` with every call."
    )
    seed: int | None = Field(None, ge=0, le=MAX_SEED, description="For repeatable sampling.")

    def llm_endpoint(self) -> str | None:
        return self.endpoint

    def call_options(self) -> dict[str, Any]:
        """The keyword arguments of ``LLMClient.chat`` this step sets."""
        options = {
            "model": self.model,
            "temperature": self.temperature,
            "max_tokens": self.max_output_tokens,
            "seed": self.seed,
        }
        return {key: value for key, value in options.items() if value is not None}
