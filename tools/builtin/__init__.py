"""Built-in tool providers: Python tools compiled into the app, in the MCP shape.

Providers are named in ``settings.FLOWPILOT_BUILTIN_PROVIDERS`` and instantiated
on demand by :func:`load_providers` — never registered by import side effects.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.conf import settings
from django.utils.module_loading import import_string

from tools.builtin.base import BuiltinProvider, BuiltinTool
from tools.errors import ToolConfigError

__all__ = ["BuiltinProvider", "BuiltinTool", "load_providers"]


def load_providers(paths: Iterable[str] | None = None) -> list[BuiltinProvider]:
    """Instantiate providers from dotted paths (default: the setting), in order."""
    chosen = settings.FLOWPILOT_BUILTIN_PROVIDERS if paths is None else paths
    providers: list[BuiltinProvider] = []
    for path in chosen:
        try:
            provider = import_string(path)()
        except ImportError as exc:
            raise ToolConfigError(f"cannot import built-in provider {path!r}: {exc}") from exc
        if not isinstance(provider, BuiltinProvider):
            raise ToolConfigError(f"{path!r} is not a BuiltinProvider")
        providers.append(provider)
    return providers
