"""What a model call costs: a price table per model, in US dollars per million tokens.

A price is two numbers, input (prompt) and output (completion) tokens, each in US
dollars per million tokens, with at most six decimals. Money is counted in whole
**pico-dollars** (10⁻¹² USD): a token's price is then a whole number (``price * 10**6``),
so a cost is ``prompt_tokens * input + completion_tokens * output`` in integers, and
every total (a step, a run, a workflow's month) is an exact sum, on SQLite as on
PostgreSQL, to the token.

The table is, from weakest to strongest:

1. ``DEFAULT_PRICES``: list prices of common hosted models (taken 2026-11; providers
   change them, so an installation that pays other prices overrides them);
2. ``FLOWPILOT_LLM_PRICES``: the installation's own, for every endpoint;
3. ``FLOWPILOT_LLM_<NAME>_PRICES``: one named endpoint's own (a self-hosted model
   served at no cost: ``{"qwen2.5:14b": [0, 0]}``).

A model is found by its exact name, then without a provider prefix (``openai/gpt-4o``
is ``gpt-4o``), then by the longest listed name it starts with followed by ``-``
(``gpt-4o-2024-08-06`` is ``gpt-4o``; ``gpt-4o-mini`` is its own). A model the table
does not know has no price: its calls are counted in tokens, shown as unpriced, and a
step under a budget in money refuses to call it (``runs.engine.spend``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, InvalidOperation
from typing import Any

PICO = 10**12  # pico-dollars per US dollar
PER_MILLION = 10**6
MAX_PRICE_DECIMALS = 6
MAX_PRICE = Decimal(1_000_000)  # USD per million tokens; past it is a typo, not a price


class PriceError(ValueError):
    """A price table that cannot be read; the message names the entry."""


@dataclass(frozen=True)
class Price:
    """One model's price: pico-dollars per input token and per output token (whole)."""

    input: int
    output: int

    @classmethod
    def per_million(
        cls, input_usd: Decimal | str | float, output_usd: Decimal | str | float
    ) -> Price:
        return cls(_per_token(input_usd, "input"), _per_token(output_usd, "output"))

    def cost(self, prompt_tokens: int, completion_tokens: int) -> int:
        """The cost in pico-dollars."""
        return max(prompt_tokens, 0) * self.input + max(completion_tokens, 0) * self.output

    def as_dict(self) -> dict[str, str]:
        """US dollars per million tokens, as decimal text."""
        return {
            "input": usd_text(self.input * PER_MILLION),
            "output": usd_text(self.output * PER_MILLION),
        }


def _per_token(value: Decimal | str | float, side: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str | Decimal):
        raise PriceError(f"the {side} price must be a number of US dollars per million tokens")
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise PriceError(f"the {side} price {value!r} is not a number") from None
    if not amount.is_finite() or amount < 0 or amount > MAX_PRICE:
        raise PriceError(
            f"the {side} price {value!r} must be between 0 and {MAX_PRICE} US dollars per "
            "million tokens"
        )
    exponent = amount.normalize().as_tuple().exponent
    if isinstance(exponent, int) and -exponent > MAX_PRICE_DECIMALS:
        raise PriceError(f"the {side} price {value!r} has more than {MAX_PRICE_DECIMALS} decimals")
    return int(amount * PER_MILLION)  # exact: at most six decimals


# US dollars per million tokens (input, output): published list prices, 2026-11.
DEFAULT_PRICES: dict[str, tuple[str, str]] = {
    "gpt-5": ("1.25", "10"),
    "gpt-5-mini": ("0.25", "2"),
    "gpt-5-nano": ("0.05", "0.4"),
    "gpt-4.1": ("2", "8"),
    "gpt-4.1-mini": ("0.4", "1.6"),
    "gpt-4.1-nano": ("0.1", "0.4"),
    "gpt-4o": ("2.5", "10"),
    "gpt-4o-mini": ("0.15", "0.6"),
    "o3": ("2", "8"),
    "o3-mini": ("1.1", "4.4"),
    "o4-mini": ("1.1", "4.4"),
    "claude-opus-4": ("15", "75"),
    "claude-sonnet-4": ("3", "15"),
    "claude-3-5-haiku": ("0.8", "4"),
    "gemini-2.5-pro": ("1.25", "10"),
    "gemini-2.5-flash": ("0.3", "2.5"),
    "deepseek-chat": ("0.27", "1.1"),
}


def parse_prices(value: Any, where: str) -> dict[str, Price]:
    """A price table from its settings form: a JSON object (or its text) of
    ``{"model": [input, output]}`` or ``{"model": {"input": …, "output": …}}``, in US
    dollars per million tokens. ``PriceError`` names ``where`` and the entry."""
    if isinstance(value, str):
        if not value.strip():
            return {}
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise PriceError(f"{where}: not JSON ({exc.msg}, at character {exc.pos})") from None
    if not isinstance(value, Mapping):
        raise PriceError(f'{where}: must be a JSON object {{"model": [input, output]}}')
    table: dict[str, Price] = {}
    for model, entry in value.items():
        if not isinstance(model, str) or not model.strip() or len(model) > 200:
            raise PriceError(f"{where}: {model!r} is no model name")
        if isinstance(entry, Mapping) and set(entry) == {"input", "output"}:
            pair = (entry["input"], entry["output"])
        elif isinstance(entry, list | tuple) and len(entry) == 2:
            pair = (entry[0], entry[1])
        else:
            raise PriceError(
                f'{where}: the price of `{model}` must be [input, output] or {{"input": …, '
                '"output": …}, in US dollars per million tokens'
            )
        try:
            table[model.strip()] = Price.per_million(*pair)
        except PriceError as exc:
            raise PriceError(f"{where}: `{model}`: {exc}") from None
    return table


DEFAULT_TABLE = parse_prices(dict(DEFAULT_PRICES), "DEFAULT_PRICES")


@dataclass(frozen=True)
class PriceTable:
    """The prices one endpoint's calls are charged at (see the module doc)."""

    prices: Mapping[str, Price]

    def price_for(self, model: str | None) -> Price | None:
        if not model:
            return None
        for name in _names(model):
            found = self.prices.get(name)
            if found is not None:
                return found
            best = max(
                (listed for listed in self.prices if name.startswith(listed + "-")),
                key=len,
                default=None,
            )
            if best is not None:
                return self.prices[best]
        return None

    def cost(self, model: str | None, prompt_tokens: int, completion_tokens: int) -> int | None:
        """Pico-dollars, or None when ``model`` has no price."""
        price = self.price_for(model)
        return None if price is None else price.cost(prompt_tokens, completion_tokens)

    def charge(
        self, answered: str | None, asked: str, prompt_tokens: int, completion_tokens: int
    ) -> int | None:
        """What a call costs: at the price of the model that answered, or of the model
        asked when the answering name is not in the table (a provider's alias)."""
        price = self.price_for(answered) or self.price_for(asked)
        return None if price is None else price.cost(prompt_tokens, completion_tokens)


def _names(model: str) -> list[str]:
    name = model.strip()
    names = [name]
    if "/" in name:
        names.append(name.rsplit("/", 1)[1])
    return names


def price_table(*layers: Mapping[str, Price] | None) -> PriceTable:
    """The shipped defaults overridden by each of ``layers`` in turn."""
    merged: dict[str, Price] = dict(DEFAULT_TABLE)
    for layer in layers:
        merged.update(layer or {})
    return PriceTable(merged)


def usd(pico: int | None) -> Decimal | None:
    """Pico-dollars as US dollars (exact)."""
    return None if pico is None else Decimal(pico) / PICO


def usd_text(pico: int | None, places: int | None = None) -> str:
    """Pico-dollars as decimal text: exact (``places`` None, trailing zeros dropped), or
    rounded up to ``places`` decimals (what is shown: never less than was spent)."""
    if pico is None:
        return ""
    amount = Decimal(pico) / PICO
    if places is not None:
        return str(amount.quantize(Decimal(1).scaleb(-places), rounding=ROUND_CEILING))
    text = format(amount.normalize(), "f")
    return text if "." not in text else text.rstrip("0").rstrip(".") or "0"


def pico_of_usd(amount: Decimal | float | int | str) -> int:
    """US dollars as whole pico-dollars (rounded down: a budget is never raised)."""
    value = Decimal(str(amount))
    if not value.is_finite():
        raise PriceError(f"{amount!r} is no amount of money")
    return math.floor(value * PICO)
