"""tools.data_limits: a parsed document too big once its aliases are expanded, too deep,
or containing itself is named for what it is; a fine one passes."""

from __future__ import annotations

import yaml

from tools.data_limits import data_limit_problem

LAUGHS = """
a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x", "x"]
b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
e: [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
"""


def nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_an_ordinary_document_is_fine():
    assert data_limit_problem({"steps": [{"id": "a", "input_mapping": {"x": 1}}]}) is None
    assert data_limit_problem("scalar") is None


def test_aliases_count_once_expanded_without_expanding_them():
    data = yaml.safe_load(LAUGHS)  # about 111,110 values expanded, 5 lists in memory
    assert data_limit_problem(data) is None
    problem = data_limit_problem(data, max_values=100_000)
    assert problem is not None
    assert "more than 100000 values once its anchors and aliases are expanded" in problem


def test_depth_is_bounded_at_the_limit_and_not_before():
    assert data_limit_problem(nested(10), max_depth=10) is None
    assert data_limit_problem(nested(11), max_depth=10) == (
        "the document nests deeper than 10 levels"
    )


def test_a_document_far_deeper_than_the_stack_is_checked_without_recursion():
    problem = data_limit_problem(nested(50_000))
    assert problem == "the document nests deeper than 100 levels"


def test_an_anchor_containing_itself_is_refused():
    data = yaml.safe_load("a: &a [1, *a]")
    assert data_limit_problem(data) == "an anchor contains itself (a recursive alias)"
