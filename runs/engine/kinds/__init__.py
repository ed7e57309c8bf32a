"""Step kinds: one module per kind, named after it, each declaring its ``KIND`` (a ``StepKind``).

``KINDS`` maps every kind of the ``workflows.schema.Step`` union to the ``KIND`` of the
module of that name (``runs.engine.kinds.<kind>``): writing the module registers the
kind, and a kind of the union without one fails here, when the engine is imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from types import MappingProxyType

from runs.engine.kinds.base import StepKind
from workflows.schema import step_kind_names


def _kind(name: str) -> StepKind:
    """The ``KIND`` of the module named after the kind ``name``, checked to be its own."""
    module = importlib.import_module(f"{__name__}.{name}")
    kind = getattr(module, "KIND", None)
    if not isinstance(kind, StepKind) or kind.name != name:
        raise ImportError(
            f"{module.__name__} must declare KIND = StepKind(model=<the `{name}` step "
            "model of workflows.schema>, execute=...)"
        )
    return kind


KINDS: Mapping[str, StepKind] = MappingProxyType({name: _kind(name) for name in step_kind_names()})
