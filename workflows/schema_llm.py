"""How an LLM-using step (``llm``, the LLM form of ``decision``) calls its model: its
endpoint, model and sampling options, and its budget (tokens, calls, money); and a
workflow's own budget in money.
``workflows.schema`` carries them on its step models.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from pydantic import Field

from workflows.schema_triggers import FrozenModel

MAX_USD = Decimal(1_000_000)


def _usd(description: str) -> Any:
    return Field(None, ge=0, le=MAX_USD, decimal_places=6, description=description)


class MoneyBudget(FrozenModel):
    """US dollars the model calls may spend: within one run, and within a calendar month
    (UTC). Checked before every model call (what is spent plus the call's estimate) and
    after it (``runs.engine.spend``)."""

    usd_per_run: Decimal | None = _usd("US dollars of model calls in one run.")
    usd_per_month: Decimal | None = _usd(
        "US dollars of model calls in a calendar month (UTC), over every run."
    )

    def in_money(self) -> bool:
        return self.usd_per_run is not None or self.usd_per_month is not None


class DecisionBudget(MoneyBudget):
    """An LLM decision's budget: the tokens of its one model call, and money (the
    step's own spend in a run and in a month). It makes one call and calls no tool, so
    it takes no count of either."""

    max_tokens: int | None = Field(None, ge=1)


class LLMBudget(DecisionBudget):
    """An LLM-using step's budget: tokens, model calls and tool calls of one try, and
    money (the step's own spend in a run and in a month)."""

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
