"""Tool files (YAML) → :class:`~tools.spec.ToolSpec` (docs/tools.md).

A file holds one tool (a mapping) or several (a list under ``tools:``). Two
forms are accepted and normalized into the same spec:

* the current form: ``base_url`` / ``request`` / ``auth`` / ``inputs`` /
  ``response_extract`` (see :data:`NEW_KEYS`);
* the older flat form, recognised by the absence of ``request`` and
  ``response_extract``: ``method``, ``url``, ``auth_type``, ``auth_header``, … (see
  :data:`LEGACY_KEYS` and :func:`legacy_to_new`).

Every problem of a file is collected and raised once as a
:class:`~tools.errors.ToolConfigError` whose ``problems`` list holds one line per
problem: ``<file>:<line>: tool 'name': field <path>: <message>``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from tools.data_limits import data_limit_problem
from tools.errors import ToolConfigError
from tools.jsondata import storage_problem
from tools.mcp.config import McpServer
from tools.paths import list_index
from tools.spec import ToolSpec
from tools.templating import placeholders
from tools.yaml_strict import describe_yaml_error, strict_safe_load_node

NEW_KEYS = frozenset(
    {
        "name", "kind", "description", "base_url", "request", "auth", "inputs",
        "response_extract", "outputs", "timeout", "retry", "idempotent", "secret_env",
        "cookies", "response", "pagination", "follow_redirects", "max_redirects", "breaker",
        "deprecated", "replacement", "queue", "rate_limit", "output_types",
    }
)  # fmt: skip
LEGACY_KEYS = frozenset(
    {
        "name", "kind", "description", "method", "url", "base_url", "headers",
        "query_params", "params", "body_template", "body", "auth_type", "auth_header",
        "auth_token", "auth_value", "auth_query", "auth_username", "auth_password",
        "parameters", "input_schema", "output_fields", "extract", "timeout", "retry",
        "idempotent", "idempotency_header", "secret_env", "deprecated", "replacement",
        "queue",
    }
)  # fmt: skip
_LEGACY_MARKERS = frozenset({"method", "url", "auth_type", "auth_header", "output_fields"})

# (spec loc prefix, file key alternatives, keep the rest of the loc) — the first
# alternative present in the file is the one named in the message.
_LocTable = list[tuple[tuple[str, ...], tuple[str, ...], bool]]
_NEW_LOCS: _LocTable = [
    (("input_schema",), ("inputs",), True),
    (("http", "base_url"), ("base_url",), True),
    (("http", "request"), ("request",), True),
    (("http", "auth"), ("auth",), True),
    (("http", "response_extract"), ("response_extract",), True),
    (("http", "timeout"), ("timeout",), True),
    (("http", "cookies"), ("cookies",), True),
    (("http", "response"), ("response",), True),
    (("http", "pagination"), ("pagination",), True),
    (("http", "follow_redirects"), ("follow_redirects",), True),
    (("http", "max_redirects"), ("max_redirects",), True),
    (("http", "breaker"), ("breaker",), True),
    (("http",), ("request",), False),
]
_LEGACY_LOCS: _LocTable = [
    (("input_schema",), ("parameters", "input_schema"), True),
    (("outputs",), ("output_fields", "extract"), False),
    (("http", "base_url"), ("base_url", "url"), False),
    (("http", "request", "url"), ("url",), False),
    (("http", "request", "method"), ("method",), False),
    (("http", "request", "query"), ("query_params", "params"), True),
    (("http", "request", "headers"), ("headers",), True),
    (("http", "request", "body"), ("body_template", "body"), True),
    (("http", "request", "idempotency_header"), ("idempotency_header",), False),
    (("http", "auth"), ("auth_type",), False),
    (("http", "response_extract"), ("output_fields", "extract"), True),
    (("http", "timeout"), ("timeout",), False),
    (("http",), ("url",), False),
]
_LEGACY_AUTH_KEYS = {
    "none": frozenset(),
    "bearer": frozenset({"auth_token", "auth_value", "auth_header"}),
    "api_key": frozenset({"auth_header", "auth_query", "auth_value", "auth_token"}),
    "basic": frozenset({"auth_username", "auth_password", "auth_value"}),
}


class _Problems:
    """Collects located problems of one file."""

    def __init__(self, source: str, root: yaml.Node | None) -> None:
        self.source = source
        self.root = root
        self.items: list[str] = []

    def add(self, loc: Sequence[str | int], message: str, tool: str | None = None) -> None:
        line = _line_of(self.root, loc)
        where = f"{self.source}:{line}" if line else self.source
        who = f"tool {tool!r}: " if tool else ""
        field = ".".join(str(p) for p in loc) or "(file)"
        self.items.append(f"{where}: {who}field {field}: {message}")

    def raise_if_any(self) -> None:
        if self.items:
            raise ToolConfigError.of(list(self.items))


def _line_of(node: yaml.Node | None, loc: Sequence[str | int]) -> int | None:
    """1-based line of the deepest node of ``loc`` that exists in the YAML tree."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for segment in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if str(key_node.value) == str(segment):
                    child, line = value_node, key_node.start_mark.line + 1
                    break
        elif isinstance(node, yaml.SequenceNode):
            index = list_index(str(segment))
            if index is not None and 0 <= index < len(node.value):
                child = node.value[index]
                line = child.start_mark.line + 1
        if child is None:
            return line
        node = child
    return line


MAX_TOOL_FILE_BYTES = 5 * 1024 * 1024  # like workflow files


def load_tool_file(path: str | Path) -> list[ToolSpec]:
    """Parse one YAML file into specs. Raises ``ToolConfigError`` naming file, field, line.

    A file over ``MAX_TOOL_FILE_BYTES`` is refused before it is read.
    """
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_TOOL_FILE_BYTES:
            raise ToolConfigError(
                f"{file}: {size} bytes is over the {MAX_TOOL_FILE_BYTES} byte limit"
            )
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ToolConfigError(f"{file}: cannot read the file: {exc}") from exc
    return load_tool_text(text, source=str(file))


def load_tool_text(text: str, *, source: str = "<string>") -> list[ToolSpec]:
    """Parse YAML text holding one tool or a ``tools:`` list."""
    try:
        data, root = strict_safe_load_node(text)
    except yaml.YAMLError as exc:
        line, _, problem = describe_yaml_error(exc)
        where = f"{source}:{line}" if line else source
        raise ToolConfigError(f"{where}: malformed YAML: {problem}") from exc
    except RecursionError as exc:
        raise ToolConfigError(f"{source}: malformed YAML: the document nests too deeply") from exc
    return load_tool_data(data, root, source=source)


def load_tool_data(data: Any, root: yaml.Node | None, *, source: str) -> list[ToolSpec]:
    """``load_tool_text`` past the parse: ``data`` built from the node tree ``root`` (which
    gives each problem its line), for a caller that parsed the text itself."""
    too_big = data_limit_problem(data) or storage_problem(data)
    if too_big:
        raise ToolConfigError(f"{source}: {too_big}")
    problems = _Problems(source, root)
    entries = _entries(data, problems)
    specs: list[ToolSpec] = []
    seen: set[str] = set()
    for loc, entry in entries:
        spec = _tool_from_mapping(entry, loc, problems)
        if spec is None:
            continue
        if spec.name in seen:
            problems.add([*loc, "name"], f"tool {spec.name!r} is defined twice in this file")
        seen.add(spec.name)
        specs.append(spec)
    problems.raise_if_any()
    return specs


def load_mcp_server_file(path: str | Path) -> McpServer | None:
    """The MCP server a file registers (a top-level ``mcp_server:`` mapping), or None
    when the file is not a server file. Raises ``ToolConfigError`` naming the file,
    line and field of every problem."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        data, root = strict_safe_load_node(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError, RecursionError):
        return None  # reported by load_tool_file, which reads every other file
    if not (isinstance(data, dict) and "mcp_server" in data):
        return None
    problems = _Problems(str(file), root)
    for key in sorted(str(k) for k in data if k != "mcp_server"):
        problems.add([key], "unknown key (a server file holds only 'mcp_server')")
    server = None
    try:
        server = McpServer.model_validate(data["mcp_server"])
    except ValidationError as exc:
        for err in exc.errors():
            problems.add(["mcp_server", *(str(p) for p in err["loc"])], _message(err))
    problems.raise_if_any()
    return server


def _entries(data: Any, problems: _Problems) -> list[tuple[list[str | int], Any]]:
    if data is None:
        problems.add([], "the file is empty")
    elif isinstance(data, dict) and set(data) == {"tools"}:
        if isinstance(data["tools"], list) and data["tools"]:
            return [(["tools", i], item) for i, item in enumerate(data["tools"])]
        problems.add(["tools"], "expected a non-empty list of tools")
    elif isinstance(data, list):
        return [([i], item) for i, item in enumerate(data)]
    elif isinstance(data, dict):
        return [([], data)]
    else:
        problems.add([], "expected a mapping (one tool) or a 'tools:' list")
    problems.raise_if_any()
    return []


def is_legacy(data: dict[str, Any]) -> bool:
    """The older flat form: no ``request`` / ``response_extract``, but flat request keys."""
    if "request" in data or "response_extract" in data:
        return False
    return bool(_LEGACY_MARKERS & set(data)) or any(str(k).startswith("auth_") for k in data)


def _tool_from_mapping(data: Any, loc: list[str | int], problems: _Problems) -> ToolSpec | None:
    if not isinstance(data, dict):
        problems.add(loc, "a tool must be a mapping")
        return None
    tool = data.get("name") if isinstance(data.get("name"), str) else None
    legacy = is_legacy(data)
    allowed = LEGACY_KEYS if legacy else NEW_KEYS
    unknown = sorted(str(k) for k in data if k not in allowed)
    for key in unknown:
        hint = " (the flat form's keys cannot be mixed with 'request')" if not legacy else ""
        problems.add([*loc, key], f"unknown key{hint}", tool)
    if data.get("kind", "http") != "http":
        problems.add([*loc, "kind"], "only http tools are defined in files", tool)
    if unknown or data.get("kind", "http") != "http":
        return None
    try:
        normalized = legacy_to_new(data) if legacy else data
    except ValueError as exc:
        problems.add([*loc, exc.args[1] if len(exc.args) > 1 else "url"], exc.args[0], tool)
        return None
    try:
        return ToolSpec.model_validate(new_to_spec_dict(normalized))
    except ValidationError as exc:
        table = _LEGACY_LOCS if legacy else _NEW_LOCS
        for err in exc.errors():
            file_loc = _file_loc(tuple(str(p) for p in err["loc"]), table, data)
            file_loc += (err.get("ctx") or {}).get("schema_path", [])
            problems.add([*loc, *file_loc], _message(err), tool)
        return None


def _message(err: Any) -> str:
    if err["type"] == "extra_forbidden":
        return "unknown key"
    return str(err["msg"]).removeprefix("Value error, ")


def _file_loc(spec_loc: tuple[str, ...], table: _LocTable, data: dict[str, Any]) -> list[str]:
    for prefix, alternatives, keep_rest in table:
        if spec_loc[: len(prefix)] == prefix:
            key = next((a for a in alternatives if a in data), alternatives[0])
            return [key, *(spec_loc[len(prefix) :] if keep_rest else ())]
    return list(spec_loc)


def new_to_spec_dict(data: dict[str, Any]) -> dict[str, Any]:
    """The current file form → the ``ToolSpec`` field layout."""
    spec: dict[str, Any] = {
        k: data[k]
        for k in (
            "name", "kind", "description", "outputs", "retry", "idempotent", "secret_env",
            "deprecated", "replacement", "queue", "rate_limit", "output_types",
        )
        if k in data
    }  # fmt: skip
    if "inputs" in data:
        spec["input_schema"] = data["inputs"]
    http: dict[str, Any] = {
        k: data[k]
        for k in (
            "base_url", "request", "auth", "response_extract", "cookies", "response",
            "pagination", "follow_redirects", "max_redirects", "breaker",
        )
        if k in data
    }  # fmt: skip
    if "timeout" in data:
        spec["timeout"] = http["timeout"] = data["timeout"]
    spec["http"] = http
    return spec


def legacy_to_new(data: dict[str, Any]) -> dict[str, Any]:
    """The older flat form → the current file form (raises ``ValueError(msg, key)``)."""
    new: dict[str, Any] = {
        k: data[k]
        for k in (
            "name", "kind", "description", "timeout", "retry", "idempotent", "base_url",
            "secret_env", "deprecated", "replacement", "queue",
        )
        if k in data
    }  # fmt: skip
    request: dict[str, Any] = {"method": data.get("method", "GET"), "url": data.get("url", "")}
    for key, target in (("query_params", "query"), ("params", "query"), ("headers", "headers")):
        if key in data:
            request[target] = data[key]
    for key in ("body_template", "body"):
        if key in data:
            request["body"] = _legacy_body(data[key], key)
    if "idempotency_header" in data:
        request["idempotency_header"] = data["idempotency_header"]
    new["request"] = request
    new["auth"] = _legacy_auth(data)
    for key in ("parameters", "input_schema"):
        if key in data:
            new["inputs"] = data[key]
    for key in ("output_fields", "extract"):
        if key in data:
            new["response_extract"] = _legacy_extract(data[key], key)
    return new


def _legacy_body(body: Any, key: str) -> Any:
    """A flat-form body: a mapping/list, a single ``"{{x}}"``, or a JSON document string."""
    if not isinstance(body, str):
        return body
    found = placeholders(body)
    if len(found) == 1 and body.strip() == "{{" + found[0].raw + "}}":
        return body.strip()
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not a JSON document: {exc.msg}", key) from exc


def _legacy_auth(data: dict[str, Any]) -> dict[str, Any]:
    kind = data.get("auth_type", "none")
    if kind not in _LEGACY_AUTH_KEYS:
        raise ValueError("expected one of none, bearer, api_key, basic", "auth_type")
    extra = sorted(k for k in data if str(k).startswith("auth_") and k != "auth_type")
    misplaced = [k for k in extra if k not in _LEGACY_AUTH_KEYS[kind]]
    if misplaced:
        raise ValueError(f"does not apply to auth_type {kind!r}", misplaced[0])
    header, value = data.get("auth_header"), data.get("auth_value")
    token = data.get("auth_token")
    if kind == "bearer":
        given = [v for v in (token, value, header) if v is not None]
        if len(given) > 1:
            raise ValueError("give the bearer token once (auth_token)", "auth_type")
        text = given[0] if given else None
        if isinstance(text, str) and text.lower().startswith("bearer "):
            text = text[7:]
        return {"type": "bearer", "token": text}
    if kind == "api_key":
        where = "query" if "auth_query" in data else "header"
        name = data.get("auth_query") if where == "query" else header
        return {"type": "api_key", "in": where, "name": name, "value": value or token}
    if kind == "basic":
        password = data.get("auth_password", value)
        return {"type": "basic", "username": data.get("auth_username"), "password": password}
    return {"type": "none"}


def _legacy_extract(fields: Any, key: str) -> dict[str, str]:
    """A list of dot-paths (key = last non-numeric segment) or a key → path mapping."""
    if isinstance(fields, dict):
        return fields
    if not isinstance(fields, list) or not all(isinstance(f, str) and f for f in fields):
        raise ValueError("expected a list of dot-paths or a mapping of key -> dot-path", key)
    result: dict[str, str] = {}
    for path in fields:
        names = [s for s in path.split(".") if list_index(s) is None]
        name = names[-1] if names else path
        if name in result:
            raise ValueError(f"two paths end in {name!r}; use a key -> path mapping", key)
        result[name] = path
    return result
