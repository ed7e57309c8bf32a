"""Reading an OpenAPI document and resolving its local references."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import yaml
from django.conf import settings

from tools.errors import ToolConfigError

MAX_DOCUMENT_BYTES = 5 * 1024 * 1024
MAX_RESOLVED_NODES = 500_000  # values produced by expanding $ref, for one whole import
MAX_REF_DEPTH = 64  # references nested in references
MAX_RESOLVE_SECONDS = 20.0


class OpenAPIError(ToolConfigError):
    """The document cannot be read or is not OpenAPI 3.0/3.1."""

    code = "openapi_invalid"


def openapi_read(source: str, *, http: httpx.Client | None = None) -> dict[str, Any]:
    """The document at ``source``: a file path, or an http(s) URL whose host is in
    ``FLOWPILOT_OPENAPI_HOSTS`` (nothing else is fetched). YAML or JSON."""
    return openapi_parse(openapi_text(source, http=http), source=source)


def openapi_text(source: str, *, http: httpx.Client | None = None) -> str:
    """The text at ``source`` (a file, or a URL on the allowed hosts), at most
    ``MAX_DOCUMENT_BYTES``."""
    if urlsplit(source).scheme in ("http", "https"):
        return _fetch(source, http=http)
    try:
        if Path(source).stat().st_size > MAX_DOCUMENT_BYTES:
            raise OpenAPIError(f"{source}: the document is larger than {MAX_DOCUMENT_BYTES} bytes")
        return Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OpenAPIError(f"{source}: cannot read the file: {exc}") from exc


def openapi_parse(text: str, *, source: str) -> dict[str, Any]:
    """``text`` read as an OpenAPI 3.0/3.1 document (YAML or JSON); ``OpenAPIError`` naming
    ``source`` when it is not one. Every path must be a string key with an object value."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise OpenAPIError(f"{source}: neither YAML nor JSON: {exc}") from exc
    version = str(data.get("openapi", "")) if isinstance(data, dict) else ""
    if not (version.startswith("3.0") or version.startswith("3.1")):
        found = repr(version) if version else "no 'openapi' field"
        raise OpenAPIError(f"{source}: not an OpenAPI 3.0/3.1 document ({found})")
    if not isinstance(data.get("paths"), dict):
        raise OpenAPIError(f"{source}: the document has no 'paths'")
    for path, item in data["paths"].items():
        if not isinstance(path, str) or not isinstance(item, dict):
            raise OpenAPIError(f"{source}: paths.{path} must be a string key with an object")
    return data


def _fetch(url: str, *, http: httpx.Client | None) -> str:
    host = urlsplit(url).hostname or ""
    allowed = [h.lower() for h in settings.FLOWPILOT_OPENAPI_HOSTS]
    if host.lower() not in allowed:
        raise OpenAPIError(
            f"{url}: host {host!r} is not in FLOWPILOT_OPENAPI_HOSTS "
            f"({', '.join(allowed) or 'empty'}); download the document and pass the file"
        )
    client = http or httpx.Client(timeout=30, follow_redirects=False)
    try:
        response = client.get(url)
    except httpx.HTTPError as exc:
        raise OpenAPIError(f"{url}: cannot fetch the document: {exc}") from exc
    finally:
        if http is None:
            client.close()
    if response.status_code != 200:
        raise OpenAPIError(f"{url}: answered HTTP {response.status_code}")
    if len(response.content) > MAX_DOCUMENT_BYTES:
        raise OpenAPIError(f"{url}: the document is larger than {MAX_DOCUMENT_BYTES} bytes")
    return response.text


class ResolveBudget:
    """How far one document's references may be expanded: at most ``nodes`` values
    produced, references nested at most ``depth`` deep, and ``seconds`` of work, for
    every ``resolve`` of one import together.

    Cycles alone are not the danger: schemas that each refer to the next one twice
    (a ``$ref`` "billion laughs") expand exponentially without ever repeating along
    one path, so a few kilobytes would grow without bound. Past a bound the import
    stops with ``OpenAPIError`` naming the bound and where it was hit."""

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
        self.depth = depth
        self.seconds = seconds
        self._clock = clock
        self._deadline = clock() + seconds

    def spend(self, where: str, depth: int) -> None:
        """Count one produced value at reference depth ``depth``; raise past a bound."""
        self.nodes_left -= 1
        if self.nodes_left < 0:
            raise OpenAPIError(
                f"{where}: expanding the document's $ref references produces more than "
                f"{self.nodes} values (references that multiply); not imported"
            )
        if depth > self.depth:
            raise OpenAPIError(
                f"{where}: $ref references nest more than {self.depth} deep; not imported"
            )
        if self.nodes_left % 1024 == 0 and self._clock() > self._deadline:
            raise OpenAPIError(
                f"{where}: expanding the document's $ref references took more than "
                f"{self.seconds:g}s; not imported"
            )


def resolve(
    document: dict[str, Any],
    value: Any,
    problems: list[str],
    *,
    where: str,
    budget: ResolveBudget | None = None,
) -> Any:
    """``value`` with every local ``$ref`` (``#/…``) replaced by its target, recursively.

    An external reference, a missing target or a cycle is kept as ``{}`` (any value)
    and listed in ``problems`` naming ``where``. Expansion is bounded by ``budget``
    (a fresh default one when not given): past it, ``OpenAPIError``."""
    return _resolve(document, value, problems, where, (), budget or ResolveBudget())


def _resolve(
    doc: dict[str, Any],
    value: Any,
    problems: list[str],
    where: str,
    seen: tuple[str, ...],
    budget: ResolveBudget,
) -> Any:
    budget.spend(where, len(seen))
    if isinstance(value, list):
        return [_resolve(doc, v, problems, where, seen, budget) for v in value]
    if not isinstance(value, dict):
        return value
    ref = value.get("$ref")
    if isinstance(ref, str):
        if not ref.startswith("#/"):
            problems.append(f"{where}: external reference {ref} is not supported")
            return {}
        if ref in seen:
            problems.append(f"{where}: recursive reference {ref} is cut (any value)")
            return {}
        target: Any = doc
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, dict) else None
        if target is None:
            problems.append(f"{where}: reference {ref} points nowhere")
            return {}
        return _resolve(doc, target, problems, where, (*seen, ref), budget)
    return {k: _resolve(doc, v, problems, where, seen, budget) for k, v in value.items()}
