"""Bounds on parsed YAML/JSON documents: bad input gets a clear error, never a crash.

``yaml.safe_load`` shares one object for every alias of an anchor, so a small
file can stand for billions of values ("billion laughs") that the first walk
over it (pydantic, templates, ``json.dumps``) would expand; an anchor may also
contain itself. Deep nesting overflows the recursive walkers. The loaders call
:func:`data_limit_problem` right after parsing and refuse such a document.
"""

from __future__ import annotations

from typing import Any

MAX_VALUES = 1_000_000
MAX_DEPTH = 100


def data_limit_problem(
    data: Any, *, max_values: int = MAX_VALUES, max_depth: int = MAX_DEPTH
) -> str | None:
    """Why ``data`` is too big, too deep or recursive, or None when it is fine.

    Counts the values the document holds once every alias is expanded, without
    expanding anything (each shared container is measured once). Iterative, so
    the check itself cannot overflow the stack.
    """
    sizes: dict[int, tuple[int, int]] = {}  # id → (values, depth) of finished containers
    open_: set[int] = set()
    stack: list[tuple[Any, bool]] = [(data, False)]
    while stack:
        node, finished = stack.pop()
        if not isinstance(node, dict | list):
            continue
        key = id(node)
        children = list(node.values() if isinstance(node, dict) else node)
        if finished:
            open_.discard(key)
            nested = [sizes[id(c)] for c in children if isinstance(c, dict | list)]
            values = 1 + len(children) - len(nested) + sum(n for n, _ in nested)
            depth = 1 + max((d for _, d in nested), default=0)
            if depth > max_depth:
                return f"the document nests deeper than {max_depth} levels"
            if values > max_values:
                return (
                    f"the document holds more than {max_values} values once its "
                    "anchors and aliases are expanded"
                )
            sizes[key] = (values, depth)
            continue
        if key in sizes:
            continue
        if key in open_:
            return "an anchor contains itself (a recursive alias)"
        if len(open_) >= max_depth:
            return f"the document nests deeper than {max_depth} levels"
        open_.add(key)
        stack.append((node, True))
        stack.extend((c, False) for c in children)
    return None
