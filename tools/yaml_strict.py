"""YAML loading that refuses a key written twice in one mapping.

PyYAML keeps the last of two equal keys without a word, so a second `name:` or
`steps:` would silently drop the first. Here it is a ``yaml.YAMLError`` with the
line of the repeated key, reported like any other syntax error. Merge keys
(``<<``) are left alone: overriding a merged key is their purpose.
"""

from __future__ import annotations

from typing import Any

import yaml


class StrictSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses duplicate keys."""


def _construct_mapping(
    loader: StrictSafeLoader, node: yaml.MappingNode, deep: bool = False
) -> dict[Any, Any]:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            duplicate = key in seen
        except TypeError:  # an unhashable key: the base constructor reports it
            continue
        if duplicate:
            first = seen[key].start_mark.line + 1
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r} (first written on line {first})",
                key_node.start_mark,
            )
        seen[key] = key_node
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


StrictSafeLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def strict_safe_load(text: str) -> Any:
    return yaml.load(text, Loader=StrictSafeLoader)  # noqa: S506 - a SafeLoader subclass


def strict_safe_load_node(text: str) -> tuple[Any, yaml.Node | None]:
    """``strict_safe_load(text)`` and the node tree it was built from (for the line of a
    value), from one parse of the text."""
    loader = StrictSafeLoader(text)
    try:
        root = loader.get_single_node()
        return (None if root is None else loader.construct_document(root)), root
    finally:
        loader.dispose()


def describe_yaml_error(exc: yaml.YAMLError) -> tuple[int | None, int | None, str]:
    """``(line, column, problem)`` of a YAML error, 1-based, for messages that say where."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    if mark is None:
        return None, None, problem
    return mark.line + 1, mark.column + 1, problem
