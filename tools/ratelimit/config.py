"""The ``rate_limit:`` key of a tool file: how many calls, per how many seconds, by what key.

HTTP tools only (``tools.spec.ToolSpec`` refuses it on another kind): what it paces is
the tool's requests (``tools.http.pacing``).

``{requests: N, per: SECONDS, burst: M, key: host | credential | tool | "$input.<name>"}``.
Calls sharing a key are spaced ``per / requests`` seconds apart on average; ``burst``
(default 1: evenly spaced) lets up to M go at once after an idle spell. The key says
what shares the quota: the API host (``host:port``), the credential the call sends,
the tool itself, or the value of one of the tool's inputs (an account id, say).

It is part of the tool's definition, so part of its hash: changing a limit asks for the
workflows using the tool to be approved again (``tools.pins``).
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

KEY_KINDS = ("host", "credential", "tool")
INPUT_KEY = re.compile(r"^\$input\.([A-Za-z_][A-Za-z0-9_-]{0,63})$")

KeyKind = Literal["host", "credential", "tool", "input"]


class RateLimitConfig(BaseModel):
    """A tool's rate limit (see the module doc)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    requests: int = Field(ge=1, le=1_000_000, description="Calls allowed per `per` seconds.")
    per: float = Field(1.0, gt=0, le=86_400, description="The period, in seconds.")
    burst: int | None = Field(
        None, ge=1, le=1_000_000, description="Calls that may go at once (default 1: spaced)."
    )
    key: str = Field(
        "host", description='What shares the quota: host, credential, tool or "$input.<name>".'
    )

    @field_validator("key")
    @classmethod
    def _known_key(cls, value: str) -> str:
        if value in KEY_KINDS or INPUT_KEY.match(value):
            return value
        if value.startswith("$input"):
            raise ValueError(
                f"{value!r} is not an input reference: write $input.<name>, the name of one "
                "of the tool's inputs"
            )
        raise ValueError(
            f"unknown rate limit key {value!r}: use host, credential, tool or $input.<name>"
        )

    @model_validator(mode="after")
    def _burst_within(self) -> RateLimitConfig:
        if self.burst is not None and self.burst > self.requests:
            raise ValueError(
                f"burst ({self.burst}) cannot exceed requests ({self.requests}) per period"
            )
        return self

    @property
    def key_kind(self) -> KeyKind:
        if self.key == "host":
            return "host"
        if self.key == "credential":
            return "credential"
        if self.key == "tool":
            return "tool"
        return "input"

    @property
    def input_name(self) -> str | None:
        """The input a ``$input.<name>`` key reads; None for the other keys."""
        found = INPUT_KEY.match(self.key)
        return found.group(1) if found else None

    @property
    def interval(self) -> float:
        """Seconds between two calls at the steady rate."""
        return self.per / self.requests

    @property
    def rate(self) -> float:
        """Calls per second."""
        return self.requests / self.per

    def describe(self) -> str:
        """``10 per 1 s by host`` (burst 5)."""
        per = f"{self.per:g} s"
        text = f"{self.requests} per {per} by {self.key}"
        return text + (f", burst {self.burst}" if self.burst and self.burst > 1 else "")
