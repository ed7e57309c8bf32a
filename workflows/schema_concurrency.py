"""How many runs of a workflow may run at once: the ``concurrency`` block of a workflow
file (``docs/limits.md``, "Concurrency"). ``workflows.schema.WorkflowSpec`` carries it.

A limit is part of the approved definition (and its hash), like every workflow-level
field: raising ``max_runs`` is a change a reviewer sees. Only the structure is checked
here (a positive count, a key of the form ``$input.<name>``, a known ``on_limit``); that
the key names a declared input is the validator's check (``unknown_input`` at
``concurrency.key``), and enforcing the limit is ``runs.concurrency``'s.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

# A key is one run input: its value (an account, a customer) names the pool of slots.
KEY_PATTERN = r"^\$input\.[A-Za-z_][A-Za-z0-9_]{0,63}$"
# Far more runs at once than any deployment's workers execute: past it, no limit.
MAX_RUNS_BOUND = 10_000

OnLimit = Literal["queue", "skip", "fail"]


class Concurrency(BaseModel):
    """At most ``max_runs`` runs of the workflow at once, per value of ``key``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    max_runs: int = Field(
        strict=True,  # a count: not `true`, not "3"
        ge=1,
        le=MAX_RUNS_BOUND,
        description="How many runs (per key value) may be pending or running at once.",
    )
    key: str | None = Field(
        None,
        description='"$input.<name>": one pool of slots per value of that input; omitted '
        '(or "none"): one pool for the whole workflow.',
    )
    on_limit: OnLimit = Field(
        "queue",
        description="A run started with every slot taken: `queue` (waits, first in first "
        "out per key), `skip` (recorded skipped) or `fail` (recorded failed).",
    )

    @field_validator("key")
    @classmethod
    def _key(cls, value: str | None) -> str | None:
        if value is None or value.strip().lower() == "none":
            return None
        if not re.match(KEY_PATTERN, value):
            raise ValueError(
                f"key {value!r} must be `$input.<name>` (one declared input) or `none`"
            )
        return value

    @property
    def key_input(self) -> str | None:
        """The input whose value names the pool (None: one pool for the workflow)."""
        return None if self.key is None else self.key.removeprefix("$input.")

    def describe(self) -> str:
        """What the limit means, in one sentence (the review page, the run page)."""
        count = "1 run" if self.max_runs == 1 else f"{self.max_runs:,} runs"
        scope = f" per `{self.key_input}`" if self.key_input else ""
        then = {
            "queue": "further runs queue and start, oldest first, as slots free",
            "skip": "further runs are skipped (recorded, never started)",
            "fail": "further runs fail at once, naming the limit",
        }[self.on_limit]
        return f"at most {count} at once{scope}; {then}"
