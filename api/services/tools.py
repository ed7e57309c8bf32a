"""Loading tool files over the API: only from the directories the settings allow."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings

from tools.errors import FlowpilotError
from tools.services import LoadReport, tools_load_dir


class ToolDirRefused(FlowpilotError):
    code = "tool_directory_refused"
    http_status = 400


def tools_load_allowed(*, directory: str, sync_builtin: bool = True) -> LoadReport:
    """``tools_load_dir`` on ``directory`` when it lies inside ``FLOWPILOT_API_TOOL_DIRS``.

    A client names a path on the server's disk; anything outside the configured
    directories (``..`` and symlinks resolved first) is refused before it is read.
    """
    roots = [Path(p).resolve() for p in settings.FLOWPILOT_API_TOOL_DIRS]
    try:
        target = Path(directory).resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise ToolDirRefused(f"`{directory}` is not a usable path") from exc
    if not any(target == root or target.is_relative_to(root) for root in roots):
        allowed = ", ".join(str(r) for r in roots) or "none configured"
        raise ToolDirRefused(
            f"`{directory}` is outside the directories tools load from ({allowed}; "
            "FLOWPILOT_API_TOOL_DIRS)"
        )
    return tools_load_dir(directory=target, sync_builtin=sync_builtin)
