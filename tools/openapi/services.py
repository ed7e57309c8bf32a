"""``openapi_import``: write the tool files of an OpenAPI document's operations."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools.errors import ToolConfigError
from tools.loader import load_tool_text
from tools.openapi.document import OpenAPIError, openapi_read
from tools.openapi.generate import openapi_tools


@dataclass
class ImportReport:
    """The files written and every construct that could not be expressed."""

    written: list[Path] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)


def openapi_import(
    *,
    source: str,
    out_dir: str | Path,
    prefix: str,
    tags: list[str] | None = None,
    operations: list[str] | None = None,
    overwrite: bool = False,
) -> ImportReport:
    """Read ``source`` and write one ``<tool>.yaml`` per selected operation.

    Every file is checked by the tool loader before anything is written (a file
    the loader refuses is an ``OpenAPIError`` naming it); an existing file is kept
    unless ``overwrite``. Raises ``OpenAPIError`` when nothing matches the selection.
    """
    generated = openapi_tools(
        openapi_read(source), prefix=prefix, tags=tags, operations=operations
    )
    if not generated.tools:
        raise OpenAPIError(f"{source}: no operation matches tags {tags} / ids {operations}")
    out = Path(out_dir)
    texts: dict[Path, str] = {}
    for tool in generated.tools:
        path = out / f"{tool['name']}.yaml"
        text = f"# Generated from {Path(source).name} by importopenapi.\n" + yaml.safe_dump(
            tool, sort_keys=False, allow_unicode=True, width=100
        )
        try:
            load_tool_text(text, source=str(path))
        except ToolConfigError as exc:
            raise OpenAPIError(f"generated tool does not load: {exc.message}") from exc
        if path in texts:
            raise OpenAPIError(f"two operations are both named {tool['name']!r}")
        if path.exists() and not overwrite:
            raise OpenAPIError(f"{path} exists; pass --overwrite to replace it")
        texts[path] = text
    out.mkdir(parents=True, exist_ok=True)
    report = ImportReport(unsupported=generated.unsupported)
    for path, text in texts.items():
        path.write_text(text, encoding="utf-8")
        report.written.append(path)
    return report
