"""Where tools may read files: inside ``ctx.data_dirs`` (and the output directory).

A path that leaves them — absolute elsewhere, ``..``, or a symlink pointing out — is
refused with ``ToolInputError``, not merely skipped. Used by the built-in data tools
and by multipart uploads of http tools.
"""

from __future__ import annotations

from pathlib import Path

from tools.calls import ToolCallContext
from tools.errors import ToolCallFailed, ToolInputError


def inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_read_path(raw: str, ctx: ToolCallContext) -> Path:
    """The existing file ``raw`` names inside a data dir or the output dir.

    Tried against each root in order; a path that leaves any root (``..``,
    absolute elsewhere, a symlink out) is refused, not merely skipped.
    """
    roots = [r.resolve() for r in (*ctx.data_dirs, *([ctx.output_dir] if ctx.output_dir else []))]
    outside = ToolInputError(f"path {raw!r} is outside the allowed data directories")
    if Path(raw).is_absolute():
        candidate = Path(raw).resolve()
        if not any(inside(candidate, root) for root in roots):
            raise outside
        candidates = [candidate]
    else:
        candidates = [(root / raw).resolve() for root in roots]
        if any(not inside(c, root) for c, root in zip(candidates, roots, strict=True)):
            raise outside
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    raise ToolCallFailed(f"file not found: {raw!r}")
