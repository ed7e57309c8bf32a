"""Tool versions: every change of a tool's definition is a numbered, semantic version.

Each ``ToolRevision`` (a row per definition a tool has had, ``tools.pins``) carries its
``number`` (1, 2, … per tool) and a semantic ``version`` (``1.0.0`` first), bumped by
what changed since the revision before it — computed from the two definitions, never
declared:

- **major** (breaking: a workflow approved with the old one may fail or misbehave): an
  input removed, a required input added, an optional one made required, an input's
  type narrowed or changed, enum values removed, a constraint added or tightened
  (``minimum`` raised, ``maxLength`` lowered, a ``pattern`` changed), extra inputs
  refused (``additionalProperties: false``); an output removed, its declared type
  changed or narrowed, or read from another place of the response; any change of the
  auth (type, token, secret headers or query, secret environment, an MCP server's
  headers or environment); outputs declared where none were; how the answer is read
  (format, pagination); the HTTP method or URL path, the MCP tool name, the kind;
- **minor** (compatible: what worked still works): an optional input added, a type
  widened, enum values added, a constraint removed or loosened, an input no longer
  required; an output added or its type declared for the first time; the base URL
  or the MCP server moved; what the request sends besides (query, headers, body);
  idempotency, worker queue, rate limit;
- **patch**: descriptions, retries, timeouts, and anything else.

``changes_between(old, new)`` lists the changes (where, what, level); a revision stores
those since its predecessor. ``tool_versions_diff`` compares any two versions of a
tool: the same changes, and the two definitions as a unified diff of their JSON.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MAJOR, MINOR, PATCH = "major", "minor", "patch"
_RANK = {PATCH: 0, MINOR: 1, MAJOR: 2}
FIRST_VERSION = "1.0.0"

# Keys that only describe: a change of them alone is a patch.
_PROSE = frozenset({"description", "title", "examples", "example", "$comment"})
# Lower bounds (raising one tightens) and upper bounds (lowering one tightens).
_LOWER = ("minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties")
_UPPER = ("maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties")
_EXACT = ("pattern", "format", "const", "multipleOf", "uniqueItems")
# Where a definition keeps its auth, and what an HTTP / MCP call targets.
_AUTH = (
    ("http", "auth"),
    ("http", "request", "secret_headers"),
    ("http", "request", "secret_query"),
    ("secret_env",),
    ("mcp", "server", "headers"),
    ("mcp", "server", "secret_headers"),
    ("mcp", "server", "env"),
)
_TARGET_MAJOR = (("http", "request", "method"), ("http", "request", "url"), ("mcp", "tool"))
_TARGET_MINOR = (
    ("http", "base_url"),
    ("mcp", "server", "url"),
    ("mcp", "server", "command"),
    ("mcp", "server", "args"),
)
_REQUEST_MINOR = (
    ("http", "request", "query"),
    ("http", "request", "headers"),
    ("http", "request", "body"),
    ("http", "request", "body_type"),
    ("http", "request", "files"),
    ("http", "request", "content_type"),
    ("http", "request", "idempotency_header"),
    ("idempotent",),
    ("queue",),
    ("rate_limit",),
)
# How the answer is read (its format, pages): what every output is made of.
_ANSWER_MAJOR = (("http", "pagination"), ("http", "response"))
# Everything the rules above read; any other difference is a patch.
_EXTRACT = ("http", "response_extract")
_READ_PATHS = (*_AUTH, *_TARGET_MAJOR, *_TARGET_MINOR, *_REQUEST_MINOR, *_ANSWER_MAJOR, _EXTRACT)
_READ = frozenset(
    {"name", "kind", "input_schema", "outputs", "output_types", *(p[0] for p in _READ_PATHS)}
)


@dataclass(frozen=True)
class Change:
    """One difference between two definitions of a tool."""

    path: str  # where: ``input_schema.properties.state.enum``, ``http.auth``
    what: str  # what a person reads: "input `state`: values removed: closed"
    level: str  # MAJOR | MINOR | PATCH

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "what": self.what, "level": self.level}


def bump_of(changes: Iterable[Change]) -> str:
    """The level of the biggest change (``patch`` for none)."""
    return max((c.level for c in changes), key=_RANK.__getitem__, default=PATCH)


def next_version(previous: str, level: str) -> str:
    """``previous`` (``MAJOR.MINOR.PATCH``) bumped at ``level``."""
    major, minor, patch = (int(part) for part in previous.split("."))
    if level == MAJOR:
        return f"{major + 1}.0.0"
    if level == MINOR:
        return f"{major}.{minor + 1}.0"
    return f"{major}.{minor}.{patch + 1}"


def changes_between(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """What changed from the definition ``old`` to ``new`` (stored specs), in order:
    kind, inputs, outputs, auth, target, request, then the rest."""
    changes: list[Change] = []
    if old.get("kind") != new.get("kind"):
        changes.append(Change("kind", f"kind {old.get('kind')} → {new.get('kind')}", MAJOR))
    changes += _input_changes(_dict(old.get("input_schema")), _dict(new.get("input_schema")))
    changes += _output_changes(old, new)
    for path in _AUTH:
        if value_at(old, path) != value_at(new, path):
            changes.append(Change(".".join(path), "auth changed", MAJOR))
    for paths, level, label in (
        (_TARGET_MAJOR, MAJOR, "what is called"),
        (_TARGET_MINOR, MINOR, "where it is called"),
        (_REQUEST_MINOR, MINOR, "what is sent besides the inputs"),
        (_ANSWER_MAJOR, MAJOR, "how the answer is read"),
    ):
        for path in paths:
            before, after = value_at(old, path), value_at(new, path)
            if before != after:
                shown = f"{label}: {_short(before)} → {_short(after)}"
                changes.append(Change(".".join(path), shown, level))
    changes += _other_changes(old, new)
    return changes


# --- inputs ----------------------------------------------------------------------------


def _input_changes(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    found: list[Change] = []
    props_old, props_new = _dict(old.get("properties")), _dict(new.get("properties"))
    req_old, req_new = set(old.get("required") or []), set(new.get("required") or [])
    base = "input_schema.properties"
    for name in sorted(props_old.keys() - props_new.keys()):
        found.append(Change(f"{base}.{name}", f"input `{name}` removed", MAJOR))
    for name in sorted(props_new.keys() - props_old.keys()):
        if name in req_new:
            found.append(Change(f"{base}.{name}", f"input `{name}` added, required", MAJOR))
        else:
            found.append(Change(f"{base}.{name}", f"input `{name}` added (optional)", MINOR))
    for name in sorted(props_old.keys() & props_new.keys()):
        found += _schema_changes(
            f"{base}.{name}", f"input `{name}`", props_old[name], props_new[name], widen=MINOR
        )
        if name in req_new and name not in req_old:
            found.append(Change("input_schema.required", f"input `{name}` now required", MAJOR))
        if name in req_old and name not in req_new:
            found.append(Change("input_schema.required", f"input `{name}` now optional", MINOR))
    extra_old = old.get("additionalProperties", True) is not False
    extra_new = new.get("additionalProperties", True) is not False
    path = "input_schema.additionalProperties"
    if extra_old != extra_new:
        if extra_old:
            found.append(Change(path, "inputs it does not declare are now refused", MAJOR))
        else:
            found.append(Change(path, "inputs it does not declare are now accepted", MINOR))
    elif old.get("additionalProperties") != new.get("additionalProperties"):
        found += _schema_changes(
            path, "inputs it does not declare", old.get("additionalProperties"),
            new.get("additionalProperties"), widen=MINOR,
        )  # fmt: skip
    rest_old = {k: v for k, v in old.items() if k not in _SCHEMA_READ}
    rest_new = {k: v for k, v in new.items() if k not in _SCHEMA_READ}
    if rest_old != rest_new:
        found += _prose_or(
            "input_schema", "the input schema", rest_old, rest_new, MAJOR, "changed otherwise"
        )
    return found


_SCHEMA_READ = frozenset({"properties", "required", "additionalProperties"})


def _schema_changes(
    path: str, label: str, old: Any, new: Any, *, widen: str, narrow: str = MAJOR
) -> list[Change]:
    """A property's schema, old → new: for an input a widened type is ``widen`` (minor)
    and a narrowed one ``narrow`` (major); for an output the other way round."""
    if old == new:
        return []
    if not isinstance(old, dict) or not isinstance(new, dict):
        return [Change(path, f"{label}: schema changed", MAJOR)]
    found: list[Change] = []
    types_old, types_new = _types(old), _types(new)
    if types_old != types_new:
        shown = f"type {_short(sorted(types_old) or 'any')} → {_short(sorted(types_new) or 'any')}"
        level = _type_level(types_old, types_new, widen, narrow)
        found.append(Change(f"{path}.type", f"{label}: {shown}", level))
    enum_old, enum_new = old.get("enum"), new.get("enum")
    if enum_old != enum_new:
        found += _enum_changes(f"{path}.enum", label, enum_old, enum_new, widen, narrow)
    for key in (*_LOWER, *_UPPER, *_EXACT):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        shown = f"{key} {_short(before)} → {_short(after)}"
        level = _bound(key, before, after, widen, narrow)
        found.append(Change(f"{path}.{key}", f"{label}: {shown}", level))
    read = {"type", "enum", *_LOWER, *_UPPER, *_EXACT}
    rest_old = {k: v for k, v in old.items() if k not in read}
    rest_new = {k: v for k, v in new.items() if k not in read}
    if rest_old != rest_new:
        found += _prose_or(path, label, rest_old, rest_new, MAJOR, "schema changed")
    return found


def _type_level(old: set[str], new: set[str], widen: str, narrow: str) -> str:
    """More types accepted (or any) widens, fewer narrows; a different type is major."""
    if not new or (old and old <= new) or _number_wider(old, new):
        return widen
    if not old or new <= old or _number_wider(new, old):
        return narrow
    return MAJOR


def _bound(key: str, before: Any, after: Any, widen: str, narrow: str) -> str:
    """A constraint removed loosens, one added tightens; a bound moved either way; any
    other change (a different ``pattern`` or ``format``) is a different schema."""
    if after is None:
        return widen
    if before is None:
        return narrow
    if _numeric(before, after) and key in _LOWER:
        return widen if after < before else narrow
    if _numeric(before, after) and key in _UPPER:
        return widen if after > before else narrow
    return MAJOR


def _enum_changes(
    path: str, label: str, old: Any, new: Any, widen: str, narrow: str
) -> list[Change]:
    if not isinstance(new, list):  # no enum any more: every value is accepted
        return [Change(path, f"{label}: any value now (was one of {_short(old)})", widen)]
    if not isinstance(old, list):
        return [Change(path, f"{label}: now one of {_short(new)}", narrow)]
    removed = [v for v in old if v not in new]
    added = [v for v in new if v not in old]
    found = []
    if removed:
        found.append(Change(path, f"{label}: values removed: {_values(removed)}", narrow))
    if added:
        found.append(Change(path, f"{label}: values added: {_values(added)}", widen))
    return found


def _types(schema: Mapping[str, Any]) -> set[str]:
    declared = schema.get("type")
    if isinstance(declared, str):
        return {declared}
    if isinstance(declared, list):
        return {t for t in declared if isinstance(t, str)}
    return set()


def _number_wider(old: set[str], new: set[str]) -> bool:
    """``integer`` → ``number`` widens (every integer is a number)."""
    return bool(old) and {"number" if t == "integer" else t for t in old} <= new


def _numeric(a: Any, b: Any) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))


# --- outputs ---------------------------------------------------------------------------


def _output_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    found: list[Change] = []
    names_old, names_new = list(old.get("outputs") or []), list(new.get("outputs") or [])
    kept = set(names_old) & set(names_new)
    if not names_old and names_new:  # undeclared: any field could be read; now only these
        found.append(Change("outputs", f"outputs now declared: {_values(names_new)}", MAJOR))
        names_old = names_new  # each is not "added" on top of that
    for name in [n for n in names_old if n not in names_new]:
        found.append(Change("outputs", f"output `{name}` removed", MAJOR))
    for name in [n for n in names_new if n not in names_old]:
        found.append(Change("outputs", f"output `{name}` added", MINOR))
    types_old, types_new = _dict(old.get("output_types")), _dict(new.get("output_types"))
    for name in sorted((types_old.keys() | types_new.keys()) & set(names_new)):
        path, label = f"output_types.{name}", f"output `{name}`"
        if name not in types_old:
            found.append(Change(path, f"{label}: type declared", MINOR))
        elif name not in types_new:
            found.append(Change(path, f"{label}: type no longer declared", MINOR))
        else:  # an output that may now be more than before breaks its readers
            before, after = types_old[name], types_new[name]
            found += _schema_changes(path, label, before, after, widen=MAJOR, narrow=MINOR)
    extract_old, extract_new = _dict(value_at(old, _EXTRACT)), _dict(value_at(new, _EXTRACT))
    for name in sorted(kept & (extract_old.keys() ^ extract_new.keys())):
        # An output kept, now read through an extract (or no longer): from elsewhere.
        where = f"{_short(extract_old.get(name))} → {_short(extract_new.get(name))}"
        path = f"http.response_extract.{name}"
        found.append(Change(path, f"output `{name}` read from {where}", MAJOR))
    for name in sorted(extract_old.keys() & extract_new.keys()):
        if extract_old[name] != extract_new[name]:
            where = f"{_short(extract_old[name])} → {_short(extract_new[name])}"
            path = f"http.response_extract.{name}"
            found.append(Change(path, f"output `{name}` read from {where}", MAJOR))
    return found


# --- the rest --------------------------------------------------------------------------


def _other_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[Change]:
    """Differences outside everything read above: descriptions, retries, timeouts, …"""
    found = []
    for key in sorted((old.keys() | new.keys()) - _READ):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        if isinstance(before, dict) and isinstance(after, dict):  # retry: the keys that moved
            for sub in sorted(before.keys() | after.keys()):
                if before.get(sub) != after.get(sub):
                    shown = f"{key}.{sub}: {_short(before.get(sub))} → {_short(after.get(sub))}"
                    found.append(Change(f"{key}.{sub}", shown, PATCH))
            continue
        found.append(Change(key, f"{key}: {_short(before)} → {_short(after)}", PATCH))
    for section in ("http", "mcp"):
        rest_old = _without_paths(_dict(old.get(section)), section)
        rest_new = _without_paths(_dict(new.get(section)), section)
        for key in sorted(rest_old.keys() | rest_new.keys()):
            before, after = rest_old.get(key), rest_new.get(key)
            if before != after:
                path = f"{section}.{key}"
                found.append(Change(path, f"{path}: {_short(before)} → {_short(after)}", PATCH))
    return found


def _without_paths(section: dict[str, Any], name: str) -> dict[str, Any]:
    """``section`` (``http`` or ``mcp``) without the paths the rules read."""
    kept = json.loads(json.dumps(section))
    for path in _READ_PATHS:
        if path[0] != name or len(path) < 2:
            continue
        parent = kept
        for key in path[1:-1]:
            parent = parent.get(key) if isinstance(parent, dict) else None
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
    if name == "mcp" and isinstance(kept.get("server"), dict) and not kept["server"]:
        kept.pop("server")
    if name == "http" and isinstance(kept.get("request"), dict) and not kept["request"]:
        kept.pop("request")
    return kept


def _prose_or(
    path: str, label: str, old: dict[str, Any], new: dict[str, Any], level: str, otherwise: str
) -> list[Change]:
    """A patch when only descriptive keys differ, else ``level``."""
    if _stripped(old) == _stripped(new):
        return [Change(path, f"{label}: description changed", PATCH)]
    return [Change(path, f"{label}: {otherwise}", level)]


def _stripped(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stripped(v) for k, v in value.items() if k not in _PROSE}
    if isinstance(value, list):
        return [_stripped(v) for v in value]
    return value


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def value_at(data: Any, path: tuple[str, ...]) -> Any:
    """The value at ``path`` in nested dicts, None where a part is missing."""
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def _short(value: Any, limit: int = 80) -> str:
    if isinstance(value, str):
        text = " ".join(value.split())  # one line
    else:
        text = json.dumps(
            value, ensure_ascii=False, sort_keys=True, default=str, separators=(",", ":")
        )
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _values(values: list[Any]) -> str:
    return ", ".join(_short(v, 40) for v in values)


# --- two versions side by side -----------------------------------------------------------


def definition_diff(old: Mapping[str, Any], new: Mapping[str, Any], *, a: str, b: str) -> str:
    """The two definitions as a unified diff of their JSON (keys sorted)."""
    lines_old = json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    lines_new = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False).splitlines()
    return "\n".join(difflib.unified_diff(lines_old, lines_new, a, b, lineterm=""))
