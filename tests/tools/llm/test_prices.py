"""tools/llm/prices.py: the price table, its settings form, and money in pico-dollars."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tools.llm.prices import (
    DEFAULT_PRICES,
    PICO,
    Price,
    PriceError,
    parse_prices,
    pico_of_usd,
    price_table,
    usd,
    usd_text,
)


def test_a_cost_is_exact_in_pico_dollars():
    price = Price.per_million("0.15", "0.6")
    assert price == Price(150_000, 600_000)  # pico-dollars per token
    cost = price.cost(1_234_567, 89)
    assert (
        usd(cost)
        == Decimal(1_234_567) * Decimal("0.15") / 10**6 + Decimal(89) * Decimal("0.6") / 10**6
    )
    assert price.as_dict() == {"input": "0.15", "output": "0.6"}


def test_a_sum_of_many_small_costs_is_exact():
    price = Price.per_million("0.000001", "0.075")
    total = sum(price.cost(1, 1) for _ in range(1_000_000))
    assert total == 1_000_000 * (1 + 75_000)
    assert usd_text(total) == "0.075001"


@pytest.mark.parametrize(
    ("model", "found"),
    [
        ("gpt-4o", "gpt-4o"),
        ("gpt-4o-2024-08-06", "gpt-4o"),  # a dated snapshot
        ("gpt-4o-mini", "gpt-4o-mini"),  # its own, not gpt-4o's
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("openai/gpt-4o-mini", "gpt-4o-mini"),  # a provider prefix
        ("gpt-4oxyz", None),  # a prefix must end at a dash
        ("qwen2.5:14b", None),
        ("", None),
    ],
)
def test_a_model_is_found_by_name_provider_prefix_or_snapshot(model, found):
    table = price_table()
    expected = None if found is None else table.prices[found]
    assert table.price_for(model) == expected


def test_later_layers_win_over_the_shipped_prices():
    installation = {"gpt-4o": Price.per_million(1, 2), "house": Price.per_million(0, 0)}
    endpoint = {"house": Price.per_million("0.5", "0.5")}
    table = price_table(installation, None, endpoint)
    assert table.price_for("gpt-4o") == Price.per_million(1, 2)
    assert table.price_for("house") == Price.per_million("0.5", "0.5")
    assert table.cost("nobody", 10, 10) is None
    assert set(DEFAULT_PRICES) <= set(table.prices)


def test_the_settings_form_reads_pairs_and_objects():
    text = '{"a": [1, 2.5], "b": {"input": "0.1", "output": 0}}'
    assert parse_prices(text, "X") == {
        "a": Price.per_million(1, "2.5"),
        "b": Price.per_million("0.1", 0),
    }
    assert parse_prices("", "X") == {}
    assert parse_prices("  ", "X") == {}


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("{not json", "X: not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"a": [1]}', "the price of `a` must be [input, output]"),
        ('{"a": {"input": 1}}', "the price of `a` must be"),
        ('{"a": [1, -1]}', "`a`: the output price -1 must be between 0"),
        ('{"a": ["NaN", 1]}', "`a`: the input price 'NaN' must be between 0"),
        ('{"a": ["Infinity", 1]}', "must be between 0"),
        ('{"a": [1, 2000000]}', "must be between 0 and 1000000"),
        ('{"a": ["0.0000001", 1]}', "more than 6 decimals"),
        ('{"a": [true, 1]}', "must be a number"),
        ('{"a": ["cheap", 1]}', "'cheap' is not a number"),
        ('{"": [1, 1]}', "is no model name"),
    ],
)
def test_a_bad_price_table_is_refused_naming_where_and_what(value, words):
    with pytest.raises(PriceError) as caught:
        parse_prices(value, "X")
    assert words in str(caught.value)
    assert str(caught.value).startswith("X")


def test_money_as_text_and_back():
    assert usd_text(None) == ""
    assert usd_text(0) == "0"
    assert usd_text(PICO) == "1"
    assert usd_text(1) == "0.000000000001"
    assert usd_text(1, 4) == "0.0001"  # shown rounded up: never less than spent
    assert usd_text(12_340_000_000, 4) == "0.0124"
    assert pico_of_usd("0.01") == 10_000_000_000
    assert pico_of_usd(Decimal("1.5")) == 3 * PICO // 2
    with pytest.raises(PriceError):
        pico_of_usd("NaN")
