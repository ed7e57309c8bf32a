"""Step kinds: one module per kind, each declaring its ``KIND`` (a ``StepKind``).

``KINDS`` maps every kind of the ``workflows.schema.Step`` union to it; a test checks
that none is missing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from runs.engine.kinds import decision, foreach, llm, tool, transform, workflow
from runs.engine.kinds.base import StepKind

KINDS: Mapping[str, StepKind] = MappingProxyType(
    {
        kind.name: kind
        for kind in (m.KIND for m in (tool, llm, decision, transform, foreach, workflow))
    }
)
