"""tools.yaml_strict: a key written twice in one mapping is a YAML error naming both lines;
merge keys may still override; errors are described with 1-based positions."""

from __future__ import annotations

import pytest
import yaml

from tools.yaml_strict import describe_yaml_error, strict_safe_load, strict_safe_load_node


def test_a_duplicate_key_is_an_error_with_both_lines():
    text = "name: a\nsteps: []\nname: b\n"
    with pytest.raises(yaml.YAMLError) as caught:
        strict_safe_load(text)
    line, column, problem = describe_yaml_error(caught.value)
    assert (line, column) == (3, 1)
    assert problem == "found duplicate key 'name' (first written on line 1)"


def test_duplicates_are_found_in_nested_mappings_too():
    with pytest.raises(yaml.YAMLError, match="duplicate key 'x'"):
        strict_safe_load("steps:\n  - id: a\n    input_mapping: {x: 1, x: 2}\n")


def test_a_merge_key_may_be_overridden():
    data = strict_safe_load("base: &b {retry: 1, timeout: 5}\nstep:\n  <<: *b\n  retry: 3\n")
    assert data["step"] == {"retry": 3, "timeout": 5}


def test_equal_keys_in_different_mappings_are_fine():
    assert strict_safe_load("a: {id: 1}\nb: {id: 2}\n") == {"a": {"id": 1}, "b": {"id": 2}}


def test_it_stays_a_safe_loader():
    with pytest.raises(yaml.YAMLError):
        strict_safe_load("x: !!python/object/apply:os.system ['true']\n")


def test_an_error_without_a_position_is_described_by_its_text():
    assert describe_yaml_error(yaml.YAMLError("broken")) == (None, None, "broken")


def test_one_parse_gives_the_values_and_the_nodes_with_their_lines():
    data, root = strict_safe_load_node("name: a\nsteps:\n  - id: b\n")
    assert data == strict_safe_load("name: a\nsteps:\n  - id: b\n")
    steps = {k.value: v for k, v in root.value}["steps"]
    assert steps.value[0].start_mark.line + 1 == 3
    assert strict_safe_load_node("") == (None, None)
    with pytest.raises(yaml.YAMLError, match="duplicate key 'name'"):
        strict_safe_load_node("name: a\nname: b\n")
