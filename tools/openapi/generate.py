"""OpenAPI operations → http tool file mappings (the current form of docs/tools.md).

Per operation: ``name`` (the operationId in snake case, else method + path),
``description`` (summary), ``base_url`` (``{{env.<PREFIX>_BASE_URL:-<first server>}}``),
``request`` (method, path template, query and header parameters, JSON or form body),
``auth`` (the first security requirement the format can express, credentials read
from ``<PREFIX>_…`` env variables), ``inputs`` (one property per parameter, plus
``body`` for a JSON request body), ``response_extract`` suggested from the 2xx
JSON schema's top-level properties and ``output_types``: each extracted property's
schema, its references resolved (by a budget of its own, a quarter of the import's)
and cut to ``MAX_FIELD_SCHEMA_BYTES`` (``tools.output_types.bounded``); a property
whose schema cannot be expanded within that budget, or is not a valid draft 2020-12
schema, is left untyped. What cannot be expressed is returned in
``unsupported``, one line each, never silently dropped.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tools.openapi.document import (
    MAX_RESOLVE_SECONDS,
    MAX_RESOLVED_NODES,
    ResolveBudget,
    ResolveLimit,
    Resolver,
    ShapeError,
    child,
    expect,
    kind,
    security_check,
)
from tools.openapi.document import field as field_of
from tools.output_types import bounded, output_types_problem

METHODS = ("get", "post", "put", "patch", "delete")
OTHER_METHODS = ("head", "options", "trace")
MAX_SUGGESTED_OUTPUTS = 12
PLACES = ("path", "query", "header", "cookie")
T = TypeVar("T")


@dataclass(frozen=True)
class Skipped:
    """An operation of the selection that was not imported: ``key`` is ``"POST /pets"``
    (the path alone when its whole path item could not be read), ``reason`` says why
    and where (a JSON pointer into the document)."""

    key: str
    operation_id: str
    reason: str

    def __str__(self) -> str:
        named = f" ({self.operation_id})" if self.operation_id else ""
        return f"{self.key}{named}: {self.reason}"


@dataclass
class Generated:
    """The tool files of an import and everything that was left out: the constructs
    that cannot be expressed, and the operations that could not be imported at all."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def pointer(*parts: str) -> str:
    """The JSON pointer ``#/a/b`` of ``parts`` (``/`` and ``~`` escaped)."""
    return "#" + "".join("/" + p.replace("~", "~0").replace("/", "~1") for p in parts)


@contextmanager
def _at(origin: str) -> Iterator[None]:
    """Name ``origin`` (a JSON pointer) as where a bound passed inside was reached."""
    try:
        yield
    except ResolveLimit as exc:
        exc.origin = exc.origin or origin
        raise


def snake(text: str) -> str:
    text = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text)
    return re.sub(r"[^a-zA-Z0-9]+", "_", text).strip("_").lower()


@dataclass(frozen=True)
class Operation:
    """One operation of a document, as a person picks it: ``key`` is ``"GET /pets"``."""

    key: str
    operation_id: str
    tags: tuple[str, ...]
    summary: str
    tool_name: str


def operation_key(method: str, path: str) -> str:
    return f"{method.upper()} {path}"


def tool_names(document: dict[str, Any]) -> dict[tuple[str, str], str]:
    """The tool (and file) name of every operation, keyed by ``(method, path)``.

    The operationId in snake case, else method + path; an id that leaves nothing
    (only dots or slashes) falls back to method + path too. Names are unique within
    the document: a later operation (by path, then method) whose name is taken gets
    ``_2``, ``_3``... So an id can neither name a file outside the output directory
    nor make two operations overwrite one file."""
    names: dict[tuple[str, str], str] = {}
    taken: set[str] = set()
    for path, item in sorted(document["paths"].items()):
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            op_id = op.get("operationId") if isinstance(op, dict) else None
            base = snake(str(op_id or ""))[:64] or snake(f"{method}_{path}")[:64]
            name, n = base, 1
            while name in taken:
                n += 1
                name = f"{base[: 64 - len(str(n)) - 1]}_{n}"
            taken.add(name)
            names[(method, path)] = name
    return names


def openapi_operations(document: dict[str, Any]) -> list[Operation]:
    """Every operation of the document (supported methods), by path then method."""
    found = []
    names = tool_names(document)
    for path, item in sorted(document["paths"].items()):
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            if not isinstance(op, dict):  # listed all the same: its import says what is wrong
                op = {}
            op_id = str(op.get("operationId") or "")
            found.append(
                Operation(
                    key=operation_key(method, path),
                    operation_id=op_id,
                    tags=_tags(op),
                    summary=str(op.get("summary") or op.get("description") or "").strip(),
                    tool_name=names[(method, path)],
                )
            )
    return found


def openapi_tools(
    document: dict[str, Any],
    *,
    prefix: str,
    tags: list[str] | None = None,
    operations: list[str] | None = None,
    path_prefixes: list[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Generated:
    """The tools of the operations chosen by tag, operationId or ``"METHOD /path"`` key,
    or path prefix (none given: all; an operation matching any of them is chosen).

    Only what a tool file holds is expanded — parameters and the request body in full,
    the 2xx response's schema one level deep (its property names) — each reference
    target once (``Resolver``). ``progress(done, total)`` is called after each chosen
    operation.

    An operation whose expansion passes one of its bounds (references nested too deep,
    references that multiply), or a part of which is not of its type (``ShapeError``:
    the operation not an object, ``parameters`` not an array…), is left out and listed
    in ``skipped`` with the reason and where (a JSON pointer); the others are imported.
    A bound of the whole import (the values of every operation together, the time) is
    ``ResolveLimit`` itself."""
    out = Generated()
    env = snake(prefix).upper()
    names = tool_names(document)
    selection = Selection(tags or [], operations or [], path_prefixes or [])
    resolver = Resolver(document)
    typing = Resolver(
        document,
        ResolveBudget(nodes=MAX_RESOLVED_NODES // 4, seconds=MAX_RESOLVE_SECONDS / 4),
    )
    items: dict[str, dict[str, Any]] = {}
    for path, item in sorted(document["paths"].items()):
        try:
            with resolver.budget.operation(), _at(pointer("paths", path)):
                level = _Level(resolver, f"paths.{path}", out.unsupported, {})
                found, _ = level.read(item, pointer("paths", path), dict)
            if found is not None:
                items[path] = found
        except ResolveLimit as exc:
            if exc.whole_import:
                raise
            out.skipped.append(Skipped(path, "", f"{exc.reason} {exc.at()}"))
        except ShapeError as exc:
            out.skipped.append(Skipped(path, "", str(exc.message)))
    total = sum(
        1
        for path, item in items.items()
        for method in METHODS
        if selection.chooses(item.get(method), method, path)
    )
    done = 0
    for path, item in items.items():
        level = _Level(resolver, f"paths.{path}", out.unsupported, {}, typing)
        for method in OTHER_METHODS:
            if method in item and selection.chooses(item[method], method, path):
                out.unsupported.append(f"{method.upper()} {path}: method not supported")
        for method in METHODS:
            op = item.get(method)
            if not selection.chooses(op, method, path):
                continue
            name = names[(method, path)]
            listed = len(out.unsupported)
            op_id = str(op.get("operationId") or "") if isinstance(op, dict) else ""
            try:
                with resolver.budget.operation():
                    op = expect(op, pointer("paths", path, method), dict)
                    tool = _tool(document, (path, method, name), item, op, env, level)
            except (ResolveLimit, ShapeError) as exc:
                if isinstance(exc, ResolveLimit) and exc.whole_import:
                    raise
                del out.unsupported[listed:]  # of an operation not imported
                reason = exc.message if isinstance(exc, ShapeError) else f"{exc.reason} {exc.at()}"
                out.skipped.append(Skipped(operation_key(method, path), op_id, reason))
                tool = None
            if tool is not None:
                out.tools.append(tool)
            done += 1
            if progress is not None:
                progress(done, total)
    return out


@dataclass(frozen=True)
class _Level:
    """Expanding the parts of one path item a tool needs, listing what cannot be."""

    resolver: Resolver
    where: str
    unsupported: list[str]
    shared: dict[str, Any]  # the path item's parameters, once expanded (or why not)
    typing: Resolver | None = None  # expands the response schemas of output types

    def output_type(self, schema: Any) -> dict[str, Any] | None:
        """An output field's schema, its references followed by ``typing`` and bounded in
        size; None when there is no ``typing`` or its budget is spent (the field stays
        untyped: a type is a help, never a reason to refuse an operation)."""
        if self.typing is None or not isinstance(schema, dict):
            return None
        try:
            with self.typing.budget.operation():
                found = self.typing.resolve(schema, [], where=self.where)
        except ResolveLimit:
            return None
        kept = bounded(found)
        if kept is None or output_types_problem({"field": kept}) is not None:
            return None  # not a JSON Schema 2020-12 can check (OpenAPI 3.0 forms): untyped
        return kept

    def full(self, value: Any) -> Any:
        return self.resolver.resolve(value, self.unsupported, where=self.where)

    def read(self, value: Any, at: str, expected: type[T]) -> tuple[T | None, str]:
        """``value`` (the part at the JSON pointer ``at``), its references followed, when
        it is an ``expected``, and the pointer of what was found; None for a reference
        that cannot be followed (listed); else ``ShapeError`` naming the part."""
        found, at = self.resolver.deref_at(value, self.unsupported, where=self.where, at=at)
        if found is None and value is not None:
            return None, at
        return expect(found, at, expected), at

    def get(
        self, owner: dict[Any, Any], at: str, key: Any, expected: type[T]
    ) -> tuple[T | None, str]:
        """``read`` of ``owner[key]`` (``owner`` being the part at ``at``); None when absent."""
        if key not in owner:
            return None, child(at, key)
        return self.read(owner[key], child(at, key), expected)

    def schema(self, owner: dict[Any, Any], at: str, key: Any) -> dict[str, Any] | None:
        """``owner[key]``, a schema, expanded in full (``get``'s checks); None when absent."""
        found, _ = self.get(owner, at, key, dict)
        return None if found is None else self.full(owner[key])

    def parameters(self, owner: dict[str, Any], at: str, *, shared: bool) -> list[dict[str, Any]]:
        """The parameters of an operation or (``shared``) of its path item (``owner``, at
        the pointer ``at``): ``name``, ``in``, ``required``, ``description`` and the
        expanded ``schema`` of each."""
        if shared and "parameters" in self.shared:
            known = self.shared["parameters"]
            if isinstance(known, ResolveLimit):  # every operation of the path is skipped
                again = ResolveLimit(self.where, known.reason, whole_import=False)
                again.ref, again.origin = known.ref, known.origin
                raise again
            if isinstance(known, ShapeError):
                raise ShapeError(known.pointer, known.reason)
            return list(known)
        try:
            found = self._parameters(owner, at)
        except (ResolveLimit, ShapeError) as exc:
            if shared and not (isinstance(exc, ResolveLimit) and exc.whole_import):
                self.shared["parameters"] = exc
            raise
        if shared:
            self.shared["parameters"] = found
        return found

    def _parameters(self, owner: dict[str, Any], at: str) -> list[dict[str, Any]]:
        listed, at = self.get(owner, at, "parameters", list)
        found = []
        for n, value in enumerate(listed or []):
            param, param_at = self.read(value, child(at, n), dict)
            if param is None:
                continue
            place = expect(param.get("in"), child(param_at, "in"), str)
            if place not in PLACES:
                reason = f"expected one of {', '.join(PLACES)}, got {place!r}"
                raise ShapeError(child(param_at, "in"), reason)
            schema = self.schema(param, param_at, "schema")
            found.append(
                {
                    "name": expect(param.get("name"), child(param_at, "name"), str),
                    "in": place,
                    "required": field_of(param, "required", param_at, bool),
                    "description": field_of(param, "description", param_at, str),
                    "schema": schema or {},
                }
            )
        return found


@dataclass(frozen=True)
class Selection:
    """Which operations an import takes: by tag, by operationId or ``"METHOD /path"``,
    by path prefix; nothing asked, every operation."""

    tags: list[str]
    operations: list[str]
    path_prefixes: list[str]

    def chooses(self, op: Any, method: str, path: str) -> bool:
        if op is None:
            return False
        if not (self.tags or self.operations or self.path_prefixes):
            return True
        if not isinstance(op, dict):  # chosen by its key or path: its import says why not
            op = {}
        return (
            bool(set(_tags(op)) & set(self.tags))
            or op.get("operationId") in self.operations
            or operation_key(method, path) in self.operations
            or any(path.startswith(prefix) for prefix in self.path_prefixes)
        )

    @classmethod
    def of(cls, tags: str, path_prefixes: str) -> Selection:
        """From comma-separated text, as a form field gives it."""
        return cls(_items(tags), [], _items(path_prefixes))

    def keeps(self, op: Operation) -> bool:
        """Whether ``op`` (as listed for a person to pick) is chosen."""
        if not (self.tags or self.operations or self.path_prefixes):
            return True
        path = op.key.split(" ", 1)[1]
        return (
            bool(set(op.tags) & set(self.tags))
            or op.operation_id in self.operations
            or op.key in self.operations
            or any(path.startswith(prefix) for prefix in self.path_prefixes)
        )

    def unmatched(self, document: dict[str, Any], *, options: tuple[str, str, str] = (
        "--tag", "--operation", "--path-prefix")) -> list[str]:  # fmt: skip
        """One line per tag, operation or path prefix asked for that chooses no
        operation of ``document``, with the nearest names it has; each named by its
        entry of ``options`` (the command's options by default)."""
        tag_option, operation_option, prefix_option = options
        listed = openapi_operations(document)
        tags = sorted({tag for op in listed for tag in op.tags})
        ids = sorted({op.operation_id for op in listed if op.operation_id})
        keys = [op.key for op in listed]
        paths = sorted({key.split(" ", 1)[1] for key in keys})
        lines = []
        for tag in self.tags:
            if tag not in tags:
                lines.append(f"{tag_option} {tag!r}{_near(tag, tags)}")
        for wanted in self.operations:
            if wanted not in ids and wanted not in keys:
                lines.append(f"{operation_option} {wanted!r}{_near(wanted, ids + keys)}")
        for prefix in self.path_prefixes:
            if not any(path.startswith(prefix) for path in paths):
                near = {path[: len(prefix)] for path in paths}
                near_paths = _near(prefix, sorted(near), paths)
                lines.append(f"{prefix_option} {prefix!r}{near_paths}")
        return lines


def _items(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _near(wanted: str, names: list[str], shown: list[str] | None = None) -> str:
    """`` (did you mean 'a', 'b'?)`` — the closest of ``names`` — or nothing."""
    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.6)
    if shown is not None:  # path prefixes: show the paths that begin with the match
        close = [next(p for p in shown if p.startswith(c)) for c in close]
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""


def _tags(op: dict[str, Any]) -> tuple[str, ...]:
    tags = op.get("tags")
    return tuple(str(t) for t in tags) if isinstance(tags, list) else ()


def _tool(
    doc: dict, which: tuple[str, str, str], item: dict, op: dict, env: str, level: _Level
) -> dict[str, Any] | None:
    """The tool file mapping of one operation; ``which`` is (path, method, tool name).
    A part of the operation not of its type is ``ShapeError`` naming it."""
    path, method, name = which
    where = f"{method.upper()} {path}"
    unsupported = level.unsupported
    with _at(pointer("paths", path, "parameters")):
        shared = level.parameters(item, pointer("paths", path), shared=True)
    params = {(p["in"], p["name"]): p for p in shared}
    at = pointer("paths", path, method)
    with _at(f"{at}/parameters"):
        own = level.parameters(op, at, shared=False)
    params.update({(p["in"], p["name"]): p for p in own})
    properties: dict[str, Any] = {}
    required: list[str] = []
    request: dict[str, Any] = {"method": method.upper(), "url": path}
    for (place, pname), param in sorted(params.items()):
        key = snake(pname) or "param"
        if place == "cookie":
            unsupported.append(f"{where}: cookie parameter {pname!r} not supported")
            continue
        schema = dict(param["schema"])
        if param["description"]:
            schema.setdefault("description", param["description"])
        properties[key] = schema
        if param["required"] or place == "path":
            required.append(key)
        if place == "path":
            request["url"] = request["url"].replace("{" + pname + "}", "{{" + key + "}}")
        elif place == "query":
            request.setdefault("query", {})[pname] = "{{" + key + "}}"
        elif place == "header":
            request.setdefault("headers", {})[pname] = "{{" + key + "}}"
    with _at(f"{at}/requestBody"):
        if not _body((op, at), request, properties, required, where, level):
            return None
    with _at(f"{at}/servers"):
        base_url = _base_url(doc, (item, op, pointer("paths", path), at), (env, name), where, level)
    summary = field_of(op, "summary", at, str) or field_of(op, "description", at, str) or where
    tool: dict[str, Any] = {
        "name": name,
        "description": summary.strip(),
        "base_url": base_url,
        "request": request,
    }
    auth = _auth(doc, (op, at), env, where, level)
    if auth is not None:
        tool["auth"] = auth
    tool["inputs"] = {"type": "object", "properties": properties}
    if required:
        tool["inputs"]["required"] = sorted(set(required))
    with _at(f"{at}/responses"):
        extract, types = _extract(op, at, level)
    if extract:
        tool["response_extract"] = extract
    if types:
        tool["output_types"] = types
    return tool


def _body(
    owner: tuple[dict, str],
    request: dict,
    properties: dict,
    required: list,
    where: str,
    level: _Level,
) -> bool:
    """Add the request body of the operation ``owner`` (it and its pointer) to the tool;
    False (listed) when it cannot be expressed."""
    body, at = level.get(*owner, "requestBody", dict)
    if body is None:
        return True
    content, content_at = level.get(body, at, "content", dict)
    content = content or {}
    if "application/json" in content:
        media, media_at = level.get(content, content_at, "application/json", dict)
        properties["body"] = level.schema(media or {}, media_at, "schema") or {}
        request["body"] = "{{body}}"
        if field_of(body, "required", at, bool):
            required.append("body")
    elif "application/x-www-form-urlencoded" in content:
        media, media_at = level.get(content, content_at, "application/x-www-form-urlencoded", dict)
        schema, schema_at = level.get(media or {}, media_at, "schema", dict)
        schema = schema or {}
        props, props_at = level.get(schema, schema_at, "properties", dict)
        request["body_type"] = "form"
        request["body"] = {}
        for pname in props or {}:
            if not isinstance(pname, str):
                raise ShapeError(
                    child(props_at, pname), f"a name must be a string, got {kind(pname)}"
                )
        for pname in sorted(props or {}):
            key = snake(pname)
            properties[key] = level.schema(props or {}, props_at, pname) or {}
            request["body"][pname] = "{{" + key + "}}"
        names, names_at = level.get(schema, schema_at, "required", list)
        for n, rname in enumerate(names or []):
            required.append(snake(expect(rname, child(names_at, n), str)))
    else:
        types = sorted(map(str, content))
        level.unsupported.append(f"{where}: request body types {types} not supported; skipped")
        return False
    return True


def _base_url(
    doc: dict,
    levels: tuple[dict, dict, str, str],
    names: tuple[str, str],
    where: str,
    level: _Level,
) -> str:
    """The ``base_url`` placeholder of an operation: the first entry of the nearest
    ``servers`` (the operation's, else its path's, else the document's; variables at
    their defaults). The document's servers are overridden by ``<PREFIX>_BASE_URL``;
    servers of the path or the operation (an API spread over hosts, like Open-Meteo)
    by ``<PREFIX>_<TOOL>_BASE_URL``, so one override never moves the other hosts."""
    item, op, item_at, op_at = levels
    env, name = names
    variable = f"{env}_{name.upper()}_BASE_URL"
    servers, at = level.get(op, op_at, "servers", list)
    if not servers:
        servers, at = level.get(item, item_at, "servers", list)
    if not servers:
        variable = f"{env}_BASE_URL"
        servers, at = level.get(doc, "#", "servers", list)
    url = ""
    if servers:
        server, server_at = level.read(servers[0], child(at, 0), dict)
        server = server or {}
        url = field_of(server, "url", server_at, str) or ""
        variables, variables_at = level.get(server, server_at, "variables", dict)
        for var, spec in (variables or {}).items():
            spec, spec_at = level.get(variables or {}, variables_at, var, dict)
            default = field_of(spec or {}, "default", spec_at, str) or ""
            url = url.replace("{" + str(var) + "}", default)
    if not re.match(r"^https?://", url):
        level.unsupported.append(f"{where}: server URL {url!r} is not absolute; set {variable}")
        url = ""
    return _env(variable, url.rstrip("/") or None)


def _auth(doc: dict, owner: tuple[dict, str], env: str, where: str, level: _Level) -> dict | None:
    op, at = owner
    requirements = security_check(op, at)
    if requirements is None:
        requirements = security_check(doc, "#")
    components = doc.get("components") or {}
    schemes = components.get("securitySchemes") or {}
    for requirement in requirements or []:
        for scheme_name, scopes in sorted(requirement.items()):
            scheme_at = child("#/components/securitySchemes", scheme_name)
            scheme, scheme_at = level.read(schemes.get(scheme_name) or {}, scheme_at, dict)
            auth = _scheme((scheme or {}, scheme_at), scopes, env)
            if auth is not None:
                return auth
            level.unsupported.append(f"{where}: security scheme {scheme_name!r} not supported")
    return None


def _env(name: str, default: str | None = None) -> str:
    """The ``{{env.NAME}}`` (or ``{{env.NAME:-default}}``) placeholder."""
    return "{{env." + name + ("" if default is None else ":-" + default) + "}}"


def _scheme(owner: tuple[dict, str], scopes: list, env: str) -> dict | None:
    scheme, at = owner
    kind_, token = field_of(scheme, "type", at, str), _env(f"{env}_TOKEN")
    http_scheme = (field_of(scheme, "scheme", at, str) or "").lower()
    if kind_ == "http" and http_scheme == "bearer":
        return {"type": "bearer", "token": token}
    if kind_ == "http" and http_scheme == "basic":
        user, password = _env(f"{env}_USERNAME"), _env(f"{env}_PASSWORD")
        return {"type": "basic", "username": user, "password": password}
    place = field_of(scheme, "in", at, str)
    if kind_ == "apiKey" and place in ("header", "query"):
        value = _env(f"{env}_API_KEY")
        name = expect(scheme.get("name"), child(at, "name"), str)
        return {"type": "api_key", "in": place, "name": name, "value": value}
    if kind_ != "oauth2":
        return None
    flows = field_of(scheme, "flows", at, dict) or {}
    flow = field_of(flows, "clientCredentials", f"{at}/flows", dict)
    if flow:
        flow_at = f"{at}/flows/clientCredentials"
        token_url = expect(flow.get("tokenUrl"), child(flow_at, "tokenUrl"), str)
        return {
            "type": "oauth2",
            "token_url": _env(f"{env}_TOKEN_URL", token_url),
            "client_id": _env(f"{env}_CLIENT_ID"),
            "client_secret": _env(f"{env}_CLIENT_SECRET"),
            "scopes": list(scopes),
        }
    return None


def _extract(op: dict, at: str, level: _Level) -> tuple[dict[str, str], dict[str, Any]]:
    """The suggested ``response_extract`` and ``output_types``: from the 2xx JSON schema's
    top level; of it only the extracted properties are expanded (``_Level.output_type``)."""
    responses, at = level.get(op, at, "responses", dict)
    responses = responses or {}
    ok = next((c for c in sorted(responses, key=str) if str(c).startswith("2")), None)
    if ok is None:
        return {}, {}
    response, at = level.get(responses, at, ok, dict)
    content, at = level.get(response or {}, at, "content", dict)
    media, at = level.get(content or {}, at, "application/json", dict)
    schema, at = level.get(media or {}, at, "schema", dict)
    schema = schema or {}
    if schema.get("type") == "array":  # a list body is wrapped as {items, count}
        listed = level.output_type(schema)
        types = {"count": {"type": "integer", "minimum": 0}}
        return {"items": "items", "count": "count"}, ({"items": listed} if listed else {}) | types
    props, _ = level.get(schema, at, "properties", dict)
    names = sorted(p for p in props or {} if isinstance(p, str) and re.match(r"^[\w-]+$", p))
    extract = {snake(p) or p: p for p in names[:MAX_SUGGESTED_OUTPUTS]}
    types = {}
    for key, name in extract.items():
        found = level.output_type((props or {})[name])
        if found is not None:
            types[key] = found
    return extract, types
