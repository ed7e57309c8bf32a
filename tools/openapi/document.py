"""Reading an OpenAPI document and resolving its local references."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import yaml
from django.conf import settings

from tools.errors import ToolConfigError

MAX_RESOLVED_NODES = 500_000  # values produced by expanding $ref, for one whole import
MAX_REF_DEPTH = 64  # references nested in references
MAX_RESOLVE_SECONDS = 20.0
# The settings that cap a document's size: the command line's, and the admin page's
# (uploads and URLs read for a browser, kept in the session until the import).
MAX_BYTES_SETTING = "FLOWPILOT_OPENAPI_MAX_BYTES"
UPLOAD_MAX_BYTES_SETTING = "FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES"


class OpenAPIError(ToolConfigError):
    """The document cannot be read or is not OpenAPI 3.0/3.1."""

    code = "openapi_invalid"


class ShapeError(OpenAPIError):
    """A part of the document is not of the type OpenAPI gives it: ``pointer`` names the
    part (a JSON pointer, ``#/paths/~1pets/get``), ``reason`` what was expected and found."""

    def __init__(self, pointer: str, reason: str) -> None:
        super().__init__(f"{pointer}: {reason}")
        self.pointer = pointer
        self.reason = reason


T = TypeVar("T")
_TYPE_NAMES: dict[type, str] = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
}


def kind(value: Any) -> str:
    """What ``value`` is, in the words of JSON: ``an array``, ``null``…"""
    if value is None:
        return "null"
    for cls, name in _TYPE_NAMES.items():
        if isinstance(value, cls):
            return name
    return "a number" if isinstance(value, int | float) else f"a {type(value).__name__}"


def child(at: str, key: object) -> str:
    """The JSON pointer of ``key`` inside the part at ``at`` (``/`` and ``~`` escaped)."""
    return f"{at}/" + str(key).replace("~", "~0").replace("/", "~1")


def expect(value: Any, at: str, expected: type[T]) -> T:
    """``value`` when it is an ``expected`` (dict, list, str, bool); else ``ShapeError``
    naming ``at``."""
    if isinstance(value, expected):
        return value
    raise ShapeError(at, f"expected {_TYPE_NAMES[expected]}, got {kind(value)}")


def field(owner: dict[str, Any], key: str, at: str, expected: type[T]) -> T | None:
    """``owner[key]`` (``owner`` being the part at ``at``) when it is an ``expected``,
    None when absent; ``ShapeError`` naming the field when it is something else."""
    if key not in owner:
        return None
    return expect(owner[key], child(at, key), expected)


def openapi_read(
    source: str, *, http: httpx.Client | None = None, cap_setting: str = MAX_BYTES_SETTING
) -> dict[str, Any]:
    """The document at ``source``: a file path, or an http(s) URL whose host is in
    ``FLOWPILOT_OPENAPI_HOSTS`` (nothing else is fetched). YAML or JSON."""
    return openapi_parse(openapi_text(source, http=http, cap_setting=cap_setting), source=source)


def max_bytes(cap_setting: str) -> int:
    """The size cap held by the setting ``cap_setting``."""
    return int(getattr(settings, cap_setting))


def too_large(source: str, cap_setting: str) -> OpenAPIError:
    cap = max_bytes(cap_setting)
    return OpenAPIError(
        f"{source}: the document is larger than {cap} bytes ({cap / 2**20:g} MiB), "
        f"the cap set by {cap_setting}"
    )


def openapi_text(
    source: str, *, http: httpx.Client | None = None, cap_setting: str = MAX_BYTES_SETTING
) -> str:
    """The text at ``source`` (a file, or a URL on the allowed hosts), at most the bytes
    of the setting ``cap_setting`` (``FLOWPILOT_OPENAPI_MAX_BYTES`` by default)."""
    if urlsplit(source).scheme in ("http", "https"):
        return _fetch(source, http=http, cap_setting=cap_setting)
    try:
        if Path(source).stat().st_size > max_bytes(cap_setting):
            raise too_large(source, cap_setting)
        return Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OpenAPIError(f"{source}: cannot read the file: {exc}") from exc


def openapi_parse(text: str, *, source: str) -> dict[str, Any]:
    """``text`` read as an OpenAPI 3.0/3.1 document (YAML or JSON); ``OpenAPIError`` naming
    ``source`` when it is not one. Every path must be a string key with an object value.

    JSON (what most large APIs publish) is read by the ``json`` module, YAML by libyaml
    when PyYAML has it: the same values as ``yaml.safe_load``, a hundred times faster
    on a document of megabytes."""
    try:
        data = _load(text)
    except yaml.YAMLError as exc:
        raise OpenAPIError(f"{source}: neither YAML nor JSON: {exc}") from exc
    except RecursionError as exc:
        raise OpenAPIError(f"{source}: the document nests too deeply") from exc
    version = str(data.get("openapi", "")) if isinstance(data, dict) else ""
    if not (version.startswith("3.0") or version.startswith("3.1")):
        found = repr(version) if version else "no 'openapi' field"
        raise OpenAPIError(f"{source}: not an OpenAPI 3.0/3.1 document ({found})")
    if "paths" not in data:
        raise OpenAPIError(f"{source}: the document has no 'paths'")
    try:
        document_check(data)
    except ShapeError as exc:
        raise OpenAPIError(f"{source}: {exc.message}; nothing imported") from exc
    return data


def document_check(data: dict[str, Any]) -> None:
    """``ShapeError`` naming the first part of the document as a whole that is not of
    its type: ``info``, ``paths`` (string keys, an object each), ``servers``,
    ``components`` and its ``securitySchemes``, ``security``. These are read for every
    operation, so an import cannot go on without them; an operation's own parts are
    checked as its tool is made (a wrong one skips that operation)."""
    expect(data.get("info"), "#/info", dict)
    paths = expect(data["paths"], "#/paths", dict)
    for path, item in paths.items():
        at = child("#/paths", path)
        if not isinstance(path, str):
            raise ShapeError(at, f"a path must be a string, got {kind(path)}")
        expect(item, at, dict)
    for n, server in enumerate(field(data, "servers", "#", list) or []):
        at = child("#/servers", n)
        expect(server, at, dict)
        field(server, "url", at, str)
        variables = field(server, "variables", at, dict) or {}
        for name, variable in variables.items():
            var_at = child(f"{at}/variables", name)
            expect(variable, var_at, dict)
            field(variable, "default", var_at, str)
    components = field(data, "components", "#", dict) or {}
    schemes = field(components, "securitySchemes", "#/components", dict) or {}
    for name, scheme in schemes.items():
        expect(scheme, child("#/components/securitySchemes", name), dict)
    security_check(data, "#")


def security_check(owner: dict[str, Any], at: str) -> list[dict[str, Any]] | None:
    """``owner``'s ``security``: a list of objects whose values are lists (of scopes);
    None when absent."""
    requirements = field(owner, "security", at, list)
    for n, requirement in enumerate(requirements or []):
        item_at = child(f"{at}/security", n)
        for name, scopes in expect(requirement, item_at, dict).items():
            scopes_at = child(item_at, name)
            for m, scope in enumerate(expect(scopes, scopes_at, list)):
                expect(scope, child(scopes_at, m), str)
    return requirements


def _load(text: str) -> Any:
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            pass  # YAML's flow style, or not JSON: YAML says what is wrong
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)  # noqa: S506 - a safe loader


def _fetch(url: str, *, http: httpx.Client | None, cap_setting: str) -> str:
    host = urlsplit(url).hostname or ""
    allowed = [h.lower() for h in settings.FLOWPILOT_OPENAPI_HOSTS]
    if host.lower() not in allowed:
        raise OpenAPIError(
            f"{url}: host {host!r} is not in FLOWPILOT_OPENAPI_HOSTS "
            f"({', '.join(allowed) or 'empty'}); download the document and pass the file"
        )
    cap = max_bytes(cap_setting)
    client = http or httpx.Client(timeout=30, follow_redirects=False)
    body = bytearray()
    try:
        with client.stream("GET", url) as response:
            if response.status_code != 200:
                raise OpenAPIError(f"{url}: answered HTTP {response.status_code}")
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > cap:
                    raise too_large(url, cap_setting)
            encoding = response.encoding or "utf-8"
    except httpx.HTTPError as exc:
        raise OpenAPIError(f"{url}: cannot fetch the document: {exc}") from exc
    finally:
        if http is None:
            client.close()
    try:
        return body.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise OpenAPIError(f"{url}: not {encoding} text: {exc}") from exc


class ResolveLimit(OpenAPIError):
    """Expanding references went past a bound. ``whole_import`` when the bound is the
    import's (its total of values, of distinct values expanded, of seconds), else the
    bound of one operation (its values, how deep its references nest), which the
    import skips. ``ref`` is the innermost reference being expanded when the bound was
    passed, ``origin`` the JSON pointer of the part of the operation that reached it."""

    def __init__(self, where: str, reason: str, *, whole_import: bool) -> None:
        super().__init__(f"{where}: {reason}; not imported")
        self.reason = reason
        self.whole_import = whole_import
        self.ref: str | None = None
        self.origin: str | None = None

    def at(self) -> str:
        """Where the bound was passed: `` at #/ref, reached from #/origin``, or less."""
        places = [f"at {self.ref}"] if self.ref else []
        if self.origin:
            places.append(f"reached from {self.origin}" if self.ref else f"at {self.origin}")
        return ", ".join(places)


class ResolveBudget:
    """How far one document's references may be expanded, for every ``resolve`` of
    one import together: at most ``nodes`` values written (what the tool files spell
    out: a shared expansion counts each time it is used) and ``nodes`` distinct values
    produced, and ``seconds`` of work; for each operation, at most ``nodes`` values and
    references nested at most ``depth`` deep.

    Cycles alone are not the danger: schemas that each refer to the next one twice
    (a ``$ref`` "billion laughs") expand exponentially without ever repeating along
    one path, so a few kilobytes would grow without bound. Past a bound,
    ``ResolveLimit`` naming the bound and where it was hit.

    Inside ``operation()`` a failed operation's values are given back (nothing of it
    is written), but not the distinct values it produced nor its time: those stay
    spent, so a "billion laughs" shared by many operations costs its work once (each
    later use is refused after a few steps, its parts being shared) and the import's
    memory and time stay bounded however many operations fail."""

    def __init__(
        self,
        *,
        nodes: int = MAX_RESOLVED_NODES,
        depth: int = MAX_REF_DEPTH,
        seconds: float = MAX_RESOLVE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.nodes = nodes
        self.nodes_left = nodes
        self.distinct_left = nodes
        self.depth = depth
        self.seconds = seconds
        self._clock = clock
        self._deadline = clock() + seconds
        self._unclocked = 0
        self._spent = 0  # values counted by the current operation

    @contextmanager
    def operation(self) -> Iterator[None]:
        """Count one operation's expansion: its own bounds, its values given back when
        it passes one of them (``ResolveLimit`` with ``whole_import`` false)."""
        left, self._spent = self.nodes_left, 0
        try:
            yield
        except ResolveLimit as exc:
            if not exc.whole_import:
                self.nodes_left = left
            raise
        except ShapeError:
            self.nodes_left = left
            raise

    def spend(self, where: str, depth: int, count: int = 1, *, shared: bool = False) -> None:
        """Count ``count`` produced values, the deepest at reference depth ``depth``
        (``shared``: an expansion already made, used again); raise past a bound."""
        self.nodes_left -= count
        self._spent += count
        if not shared:
            self.distinct_left -= count
        if self._spent > self.nodes:
            raise ResolveLimit(
                where,
                f"expanding the document's $ref references produces more than {self.nodes} "
                "values (references that multiply)",
                whole_import=False,
            )
        if depth > self.depth:
            raise ResolveLimit(
                where, f"$ref references nest more than {self.depth} deep", whole_import=False
            )
        if self.nodes_left < 0 or self.distinct_left < 0:
            raise ResolveLimit(
                where,
                "expanding the document's $ref references for the operations together "
                f"produces more than {self.nodes} values",
                whole_import=True,
            )
        self._unclocked += count
        if self._unclocked >= 1024:
            self._unclocked = 0
            if self._clock() > self._deadline:
                raise ResolveLimit(
                    where,
                    f"expanding the document's $ref references took more than {self.seconds:g}s",
                    whole_import=True,
                )


@dataclass(frozen=True)
class _Expansion:
    """A reference's target, expanded once: the value (shared by every place that
    refers to it: never changed), the values it counts as, how deep its references
    nest below it, and its problems (without the ``where`` they are reported at)."""

    value: Any
    size: int
    deepest: int
    problems: tuple[str, ...]


class Resolver:
    """Expands the local ``$ref`` references of one document, for one import.

    Each reference is expanded once per context and the result shared: the expansion
    of ``#/a`` depends only on which of the references reachable from ``#/a`` are being
    expanded around it (those are cut as recursive), so that set, not the whole chain,
    is the memo's key. Every use still counts the values it stands for against the
    ``budget`` — what would be written — so a reference "billion laughs" is refused
    with the same bound as before, but reaching it takes a few steps, not billions.
    Results are shared, so a caller copies before changing one."""

    def __init__(self, document: dict[str, Any], budget: ResolveBudget | None = None) -> None:
        self.document = document
        self.budget = budget or ResolveBudget()
        self._memo: dict[tuple[str, frozenset[str]], _Expansion] = {}
        self._reach: dict[str, frozenset[str]] = {}
        self._refs: dict[str, frozenset[str]] = {}

    def resolve(self, value: Any, problems: list[str], *, where: str) -> Any:
        """``value`` with every local ``$ref`` (``#/…``) replaced by its target, recursively.

        An external reference, a missing target or a cycle is kept as ``{}`` (any value)
        and listed in ``problems`` naming ``where``. Past the budget, ``ResolveLimit``."""
        found: list[str] = []
        result, _, _ = self._expand(value, (), where, found)
        problems.extend(f"{where}: {problem}" for problem in found)
        return result

    def deref(self, value: Any, problems: list[str], *, where: str) -> Any:
        """``value`` itself, or — when it is a ``{"$ref": …}`` (to a ``$ref`` …) — its
        target, not expanded any further (what reading one level needs)."""
        found, _ = self.deref_at(value, problems, where=where, at="")
        return {} if found is None else found

    def deref_at(self, value: Any, problems: list[str], *, where: str, at: str) -> tuple[Any, str]:
        """``deref`` of ``value`` (at the JSON pointer ``at``) and the pointer of what it
        found: ``at`` itself, or the last reference followed. None for a reference
        that cannot be followed (listed in ``problems``)."""
        seen: list[str] = []
        while isinstance(value, dict) and isinstance(value.get("$ref"), str):
            ref = value["$ref"]
            problem = self._refusal(ref, seen)
            if problem is not None:
                problems.append(f"{where}: {problem}")
                return None, at
            seen.append(ref)
            if len(seen) > self.budget.depth:
                try:
                    self.budget.spend(where, len(seen))
                except ResolveLimit as exc:
                    exc.ref = exc.ref or ref
                    raise
            value, at = self._target(ref), ref
        return value, at

    def _refusal(self, ref: str, seen: list[str] | tuple[str, ...]) -> str | None:
        if not ref.startswith("#/"):
            return f"external reference {ref} is not supported"
        if ref in seen:
            return f"recursive reference {ref} is cut (any value)"
        if self._target(ref) is None:
            return f"reference {ref} points nowhere"
        return None

    def _target(self, ref: str) -> Any:
        target: Any = self.document
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        return target

    def _expand(
        self, value: Any, seen: tuple[str, ...], where: str, problems: list[str]
    ) -> tuple[Any, int, int]:
        """(the expansion of ``value`` inside the references ``seen``, the values it
        counts as, how many references deeper than ``seen`` it reaches)."""
        self.budget.spend(where, len(seen))
        if isinstance(value, list):
            items, size, deepest = [], 1, 0
            for item in value:
                done, count, depth = self._expand(item, seen, where, problems)
                items.append(done)
                size, deepest = size + count, max(deepest, depth)
            return items, size, deepest
        if not isinstance(value, dict):
            return value, 1, 0
        ref = value.get("$ref")
        if isinstance(ref, str):
            problem = self._refusal(ref, seen)
            if problem is not None:
                problems.append(problem)
                return {}, 1, 0
            return self._expand_ref(ref, seen, where, problems)
        mapping, size, deepest = {}, 1, 0
        for key, item in value.items():
            done, count, depth = self._expand(item, seen, where, problems)
            mapping[key] = done
            size, deepest = size + count, max(deepest, depth)
        return mapping, size, deepest

    def _expand_ref(
        self, ref: str, seen: tuple[str, ...], where: str, problems: list[str]
    ) -> tuple[Any, int, int]:
        key = (ref, frozenset(seen) & self._reachable(ref))
        known = self._memo.get(key)
        try:
            if known is None:
                found: list[str] = []
                value, size, deepest = self._expand(self._target(ref), (*seen, ref), where, found)
                known = _Expansion(value, size, deepest, tuple(found))
                self._memo[key] = known
            else:
                self.budget.spend(where, len(seen) + 1 + known.deepest, known.size, shared=True)
        except ResolveLimit as exc:
            exc.ref = exc.ref or ref  # the innermost reference: set first, kept outward
            raise
        problems.extend(known.problems)
        return known.value, known.size + 1, known.deepest + 1

    def _reachable(self, ref: str) -> frozenset[str]:
        """Every local reference met expanding ``ref``'s target, however deep."""
        reach = self._reach.get(ref)
        if reach is None:
            found, todo = set(), [ref]
            while todo:
                for inner in self._direct_refs(todo.pop()):
                    if inner not in found:
                        found.add(inner)
                        todo.append(inner)
            reach = self._reach[ref] = frozenset(found)
        return reach

    def _direct_refs(self, ref: str) -> frozenset[str]:
        refs = self._refs.get(ref)
        if refs is None:
            found: set[str] = set()
            todo = [self._target(ref)]
            while todo:
                value = todo.pop()
                if isinstance(value, dict):
                    inner = value.get("$ref")
                    if isinstance(inner, str):
                        if inner.startswith("#/"):
                            found.add(inner)
                    else:
                        todo.extend(value.values())
                elif isinstance(value, list):
                    todo.extend(value)
            refs = self._refs[ref] = frozenset(found)
        return refs


def resolve(
    document: dict[str, Any],
    value: Any,
    problems: list[str],
    *,
    where: str,
    budget: ResolveBudget | None = None,
) -> Any:
    """``value`` with every local ``$ref`` (``#/…``) replaced by its target, recursively
    (``Resolver.resolve`` with a resolver of its own; bounded by ``budget``, a fresh
    default one when not given)."""
    return Resolver(document, budget).resolve(value, problems, where=where)
