"""benchmarks/compare.py's tracing section: what it reports is the median of the paired
blocks' ratios with a bootstrap interval around it, and the target is judged on it."""

from __future__ import annotations

from benchmarks._children import _median_interval
from benchmarks._report import targets, tracing


def test_the_interval_holds_the_median_and_is_the_same_for_the_same_figures():
    ratios = [1.01, 1.07, 0.98, 1.03, 1.12, 1.02, 1.04, 0.99, 1.05, 1.03]
    low, high = _median_interval(ratios)
    assert low <= 1.03 <= high
    assert min(ratios) <= low < high <= max(ratios)
    assert _median_interval(ratios) == (low, high)


def test_the_row_and_the_target_use_the_paired_ratio_not_the_medians():
    fig = {
        "n": 100, "off": 0.100, "on": 0.110, "inline": 0.108, "ratio": 1.04,
        "interval": (1.01, 1.07), "spans": 2010,
    }  # fmt: skip
    (row,) = tracing({"sqlite": fig})[2:]
    assert "| +4.0 % (+1.0 to +7.0) |" in row
    assert "| sqlite: chain with tracing on <= 5 % over tracing off | +4.0 % | met |" in targets(
        {"tracing": {"sqlite": fig}}
    )
    over = {**fig, "ratio": 1.06}
    assert "| +6.0 % | NOT MET |" in "\n".join(targets({"tracing": {"sqlite": over}}))


def test_a_result_file_from_before_pairing_is_read_from_its_medians():
    fig = {"n": 100, "off": 0.100, "on": 0.103, "inline": 0.102, "spans": 2010}
    (row,) = tracing({"postgresql": fig})[2:]
    assert "| +3.0 % |" in row
