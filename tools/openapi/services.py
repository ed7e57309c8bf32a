"""Writing (and loading) the tool files of an OpenAPI document's operations.

``openapi_import`` is the ``importopenapi`` command's service: read a file or URL,
write the files. ``openapi_import_load`` is the admin page's: the document already
read (an upload or a URL), the files written under ``FLOWPILOT_OPENAPI_IMPORT_DIR``
and loaded into the registry, for a person holding the tool permissions. Both write
through ``openapi_write``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.db import DatabaseError

from tools.errors import ToolConfigError
from tools.loader import load_tool_data
from tools.openapi import IMPORT_PERMISSIONS
from tools.openapi.document import OpenAPIError, openapi_read
from tools.openapi.generate import (
    Selection,
    Skipped,
    openapi_operations,
    openapi_tools,
    pointer,
    snake,
)
from tools.permissions import permission_require
from tools.services import LoadedTool, LoadError, tools_load_dir
from tools.sources import source_record_openapi

# ``progress(stage, done, total)``: see ``openapi_write``.
Progress = Callable[[str, int, int], None]


class _Dumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """libyaml's safe dumper (PyYAML's own without it) writing every value in place:
    an expanded reference is one object shared by every place that refers to it, and
    a tool file spells each out rather than as a YAML anchor and alias."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def tool_yaml(tool: dict[str, Any]) -> str:
    """One tool mapping as the YAML of its file."""
    return yaml.dump(tool, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


def _check(text: str, *, source: str) -> None:
    """The tool loader's check of a generated file, the text parsed by libyaml (when
    PyYAML has it): the file is ``tool_yaml``'s, so it holds no key twice, which is all
    the loader's own (pure Python) parse would add."""
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(text)
    try:
        root = loader.get_single_node()
        data = None if root is None else loader.construct_document(root)
    finally:
        loader.dispose()
    load_tool_data(data, root, source=source)


@dataclass
class ImportReport:
    """The files written, every construct that could not be expressed, the operations
    that could not be imported, and — when the files were loaded — the tools stored and
    the files that did not load."""

    written: list[Path] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    loaded: list[LoadedTool] = field(default_factory=list)
    errors: list[LoadError] = field(default_factory=list)
    # What the document says of itself ({name: info.title, version: info.version}).
    info: dict[str, str] = field(default_factory=dict)
    # Why the document was not recorded as a tool source ("" when it was, or not asked).
    not_recorded: str = ""

    @property
    def tools(self) -> list[str]:
        """The names of the tools written (one file each, named after its tool)."""
        return sorted(path.stem for path in self.written)


def openapi_import(
    *,
    source: str,
    out_dir: str | Path,
    prefix: str,
    tags: list[str] | None = None,
    operations: list[str] | None = None,
    path_prefixes: list[str] | None = None,
    overwrite: bool = False,
    strict: bool = False,
    progress: Progress | None = None,
    record: bool = True,
) -> ImportReport:
    """Read ``source`` (a file, or a URL on the allowed hosts; at most
    ``FLOWPILOT_OPENAPI_MAX_BYTES``) and write one ``<tool>.yaml`` per selected
    operation into ``out_dir``. With ``record`` the document is recorded as a tool
    source with these choices (``tools.sources``), so it is read again on its own."""
    report = openapi_write(
        document=openapi_read(source),
        source=source,
        out_dir=out_dir,
        prefix=prefix,
        tags=tags,
        operations=operations,
        path_prefixes=path_prefixes,
        overwrite=overwrite,
        strict=strict,
        progress=progress,
    )
    if record:
        options = {
            "out_dir": str(Path(out_dir).resolve()),
            "prefix": prefix,
            "tags": list(tags or []),
            "operations": list(operations or []),
            "path_prefixes": list(path_prefixes or []),
            "strict": strict,
        }
        try:
            source_record_openapi(
                location=_location(source), options=options, info=report.info, tools=report.tools
            )
        except DatabaseError as exc:  # the files are written; only the record is missing
            report.not_recorded = f"not recorded as a tool source (the database: {exc})"
    return report


def _location(source: str) -> str:
    """A URL as given; a file as its absolute path (a refresh runs from anywhere)."""
    if _is_url(source):
        return source
    return str(Path(source).resolve())


def _is_url(source: str) -> bool:
    return source.lower().startswith(("http://", "https://"))


def _document_info(document: dict[str, Any]) -> dict[str, str]:
    found = document.get("info")
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    return {
        "name": str(info.get("title") or "")[:200],
        "version": str(info.get("version") or "")[:100],
    }


def openapi_write(
    *,
    document: dict[str, Any],
    source: str,
    out_dir: str | Path,
    prefix: str,
    tags: list[str] | None = None,
    operations: list[str] | None = None,
    path_prefixes: list[str] | None = None,
    overwrite: bool = False,
    strict: bool = False,
    named_must_import: bool = True,
    progress: Progress | None = None,
) -> ImportReport:
    """Write one ``<tool>.yaml`` per operation chosen by tag, operationId or
    ``"METHOD /path"``, or path prefix (none: all).

    An operation that cannot be imported — its references expand past one of its
    bounds, a part of it is not of its type, or its file would not load — is skipped
    and listed in ``skipped``, the others written. It is an ``OpenAPIError`` naming
    every such operation, and nothing is written, when ``strict``, when it was named
    in ``operations`` (unless not ``named_must_import``: the admin page, where every
    operation is picked by name), or when nothing is left. Every file is checked by
    the tool loader before anything is written; an existing file is kept unless
    ``overwrite``. A tag, operation or path prefix asked for that chooses nothing is
    an ``OpenAPIError`` naming it and the nearest the document has.
    ``progress(stage, done, total)`` follows the operations: ``"generate"`` while
    their tools are made, ``"check"`` while the files are checked."""
    selection = Selection(tags or [], operations or [], path_prefixes or [])
    unmatched = selection.unmatched(document)
    if unmatched:
        raise OpenAPIError(f"{source}: no operation matches " + "; ".join(unmatched))
    generated = openapi_tools(
        document,
        prefix=prefix,
        tags=tags,
        operations=operations,
        path_prefixes=path_prefixes,
        progress=(lambda done, total: progress("generate", done, total)) if progress else None,
    )
    out = Path(out_dir)
    texts: dict[Path, str] = {}
    skipped = list(generated.skipped)
    listed = {op.tool_name: op for op in openapi_operations(document)} if generated.tools else {}
    for done, tool in enumerate(generated.tools, 1):
        path = out / f"{tool['name']}.yaml"
        text = f"# Generated from {Path(source).name} by importopenapi.\n" + tool_yaml(tool)
        if progress is not None:
            progress("check", done, len(generated.tools))
        try:
            _check(text, source=str(path))
        except ToolConfigError as exc:
            op = listed[tool["name"]]
            at = pointer("paths", op.key.split(" ", 1)[1], op.key.split(" ", 1)[0].lower())
            reason = f"{at}: the generated tool does not load: {exc.message}"
            skipped.append(Skipped(op.key, op.operation_id, reason))
            continue
        if path in texts:
            raise OpenAPIError(f"two operations are both named {tool['name']!r}")
        if path.exists() and not overwrite:
            raise OpenAPIError(f"{path} exists; pass --overwrite to replace it")
        texts[path] = text
    named = (operations or []) if named_must_import else []
    _refuse(source, skipped, texts, strict=strict, named=named)
    out.mkdir(parents=True, exist_ok=True)
    report = ImportReport(
        unsupported=generated.unsupported, skipped=skipped, info=_document_info(document)
    )
    for path, text in texts.items():
        path.write_text(text, encoding="utf-8")
        report.written.append(path)
    return report


def _refuse(
    source: str, skipped: list[Skipped], texts: dict[Path, str], *, strict: bool, named: list[str]
) -> None:
    """Refuse the whole import when operations were skipped and that is not allowed."""
    asked = [s for s in skipped if s.key in named or (s.operation_id and s.operation_id in named)]
    if asked:
        raise OpenAPIError(
            f"{source}: the operation(s) asked for cannot be imported, nothing written: "
            + "; ".join(map(str, asked))
        )
    if skipped and strict:
        raise OpenAPIError(
            f"{source}: {len(skipped)} operation(s) cannot be imported (--strict), nothing "
            "written: " + "; ".join(map(str, skipped))
        )
    if not texts:
        why = (": " + "; ".join(map(str, skipped))) if skipped else ""
        raise OpenAPIError(f"{source}: no operation of the selection can be written{why}")


def openapi_import_load(
    *,
    document: dict[str, Any],
    source: str,
    prefix: str,
    operations: list[str],
    overwrite: bool,
    actor: Any,
) -> ImportReport:
    """Write the chosen operations' files under ``FLOWPILOT_OPENAPI_IMPORT_DIR/<prefix>/``
    and load them into the registry, as ``loadtools`` would. Needs ``tools.add_tool``
    and ``tools.change_tool`` (``PermissionRefused``); an empty selection is refused."""
    for permission in IMPORT_PERMISSIONS:
        permission_require(
            actor=actor, permission=permission, action="import tools from an OpenAPI document"
        )
    if not operations:
        raise OpenAPIError("choose at least one operation to import")
    directory = snake(prefix) or "openapi"
    report = openapi_write(
        document=document,
        source=source,
        out_dir=Path(settings.FLOWPILOT_OPENAPI_IMPORT_DIR) / directory,
        prefix=prefix,
        operations=operations,
        overwrite=overwrite,
        named_must_import=False,
    )
    for path in report.written:
        loaded = tools_load_dir(directory=path, sync_builtin=False)
        report.loaded.extend(loaded.tools)
        report.errors.extend(loaded.errors)
    if _is_url(source):
        # An uploaded document (its source is the name the browser sent) cannot be read
        # again: only a document fetched from a URL is a source.
        options = {
            "out_dir": str((Path(settings.FLOWPILOT_OPENAPI_IMPORT_DIR) / directory).resolve()),
            "prefix": prefix, "tags": [], "operations": list(operations),
            "path_prefixes": [], "strict": False,
        }  # fmt: skip
        source_record_openapi(
            location=_location(source), options=options, info=report.info, tools=report.tools
        )
    return report
