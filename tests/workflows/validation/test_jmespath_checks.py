"""workflows.validation.jmespath_checks: a transform reads only the names it maps — a name
it does not map, a loop variable JMESPath lacks, a double-quoted "text" that JMESPath
reads as a field — and the element keys a later step may read."""

from __future__ import annotations

import jmespath
import pytest

from tools.registry import ToolRegistry
from workflows.validation.jmespath_checks import element_keys, loop_variables, root_names
from workflows.validator import validate_workflow


def messages(expression: str, **mapping) -> list[str]:
    steps = [
        {"id": "rows", "kind": "transform", "expression": "{list: a}", "input_mapping": {"a": [1]}},
        {"id": "t", "kind": "transform", "expression": expression, "input_mapping": mapping},
    ]
    report = validate_workflow({"name": "j", "steps": steps}, registry=ToolRegistry([]))
    return [i.message for i in report.errors if i.path == "steps[1].expression"]


def roots(expression: str) -> list[str]:
    return list(root_names(jmespath.compile(expression).parsed))


def test_the_roots_an_expression_reads_are_its_top_level_fields():
    assert roots("{total: sum(rows[].amount), first: rows[0].name}") == ["rows", "rows"]
    assert roots("items[?price > limit].name") == ["items"]
    assert roots("@") == []


def test_a_name_not_mapped_is_null_and_named_with_what_is_mapped():
    found = messages("{n: lenght}", length=1)
    assert found == [
        "transform `t` reads `lenght`, which it does not map, so it is null; the expression "
        "sees only its mapped names: `length` (did you mean `length`?)"
    ]
    assert "a transform reads no step directly" in messages("rows.list", x=1)[0]
    assert messages("{n: x}", x=1) == []


def test_a_loop_variable_is_told_to_read_the_fields_directly():
    tree = jmespath.compile("items[].{n: item.name}").parsed
    assert list(loop_variables(tree)) == [("items", "item")]
    assert "JMESPath has no loop variable" in messages("items[].{n: item.name}", items=[])[0]


@pytest.mark.parametrize("expression", ['items[?status == "ok"]', 'items[?"ok" == status]'])
def test_double_quotes_in_a_comparison_are_a_field_not_text(expression):
    found = messages(expression, items=[])
    assert any("write 'ok' (single quotes) for the text" in m for m in found)


def test_element_keys_of_a_projected_list():
    assert element_keys("{rows: items[].{a: x, b: y}, n: length(items)}", "rows") == ("a", "b")
    assert element_keys("{rows: items}", "rows") == ()
    assert element_keys("not {", "rows") == ()
