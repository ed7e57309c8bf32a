"""workflows.validation.report: issues as data — sorted the way a person reads a file,
raised once with every error, paths spelt as JSON paths, names suggested and listed."""

from __future__ import annotations

import pytest

from workflows.validation.report import (
    ValidationReport,
    WorkflowInvalid,
    error,
    format_path,
    names,
    sort_issues,
    suggest,
    warning,
)


def test_issues_sort_by_path_with_numbers_as_numbers_then_code_and_drop_duplicates():
    issues = [
        error("b_code", "steps[10].id", "m"),
        error("a_code", "steps[9].id", "m"),
        warning("z_code", "steps[9].id", "m"),
        error("a_code", "steps[9].id", "m"),
        error("top", "", "m"),
    ]
    ordered = sort_issues(issues)
    assert [(i.path, i.code) for i in ordered] == [
        ("", "top"),
        ("steps[9].id", "a_code"),
        ("steps[9].id", "z_code"),
        ("steps[10].id", "b_code"),
    ]


def test_a_report_with_errors_raises_once_naming_the_first():
    report = ValidationReport(
        (error("not_ancestor", "steps[1]", "reads `b`"), warning("unused_input", "inputs.x", "w"))
    )
    assert not report.ok
    assert len(report.errors) == len(report.warnings) == 1
    with pytest.raises(WorkflowInvalid) as caught:
        report.raise_for_errors()
    assert str(caught.value.message) == "workflow is invalid (1 error); first: steps[1]: reads `b`"
    assert caught.value.report is report


def test_warnings_alone_do_not_raise():
    ValidationReport((warning("unused_input", "inputs.x", "w"),)).raise_for_errors()


def test_paths_quote_keys_that_are_not_plain_names():
    assert format_path(("steps", 2, "input_mapping", "lat")) == "steps[2].input_mapping.lat"
    assert format_path(("headers", "x y")) == "headers['x y']"
    assert format_path((0, "id"), prefix="steps") == "steps[0].id"
    assert format_path(("$input",)) == "$input"


def test_a_close_name_is_suggested_and_a_far_one_is_not():
    assert suggest("goe", ["geo", "weather"]) == " (did you mean `geo`?)"
    assert suggest("zzz", ["geo", "weather"]) == ""


def test_names_are_sorted_unique_and_capped():
    assert names(["b", "a", "b"]) == "`a`, `b`"
    assert names([]) == "none"
    assert names([], empty="no tools") == "no tools"
    assert names([f"t{i:02}" for i in range(30)], limit=2) == "`t00`, `t01`, … (30 in all)"
