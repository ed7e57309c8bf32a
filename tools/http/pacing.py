"""An http tool call's rate limit and pacing: its key, its wait, what its answer says.

The key says which calls share a quota (``tools.ratelimit.config``): ``host:<host:port>``,
``tool:<name>``, ``credential:<stored name>`` (or, for a credential written in the tool
file, a hash of the values the request carries: never the secret itself), or
``input:<name>=<value>@<host:port>``. A tool without ``rate_limit`` is keyed by its host,
for the pauses its API's headers ask for.

``Paced`` is built once per call (``paced_call``) and used for every page: ``admit``
before each request (after a paged call's first page too), ``observe`` after each
answer. ``waited`` adds up what the call slept in place, recorded on its request.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import Any

from tools.breaker.core import breaker_host
from tools.calls import ToolCallContext
from tools.http.request import PreparedRequest
from tools.http.transport import Received
from tools.ratelimit.config import RateLimitConfig
from tools.ratelimit.core import Pacer
from tools.ratelimit.headers import pause_seconds
from tools.spec import ToolSpec


def pace_key(spec: ToolSpec, prepared: PreparedRequest, arguments: dict[str, Any]) -> str:
    """The key of ``spec``'s call (see the module doc)."""
    host = breaker_host(prepared.merged_url)
    limit = spec.rate_limit
    kind = "host" if limit is None else limit.key_kind
    if kind == "tool":
        return f"tool:{spec.name}"
    if kind == "credential":
        named = spec.credential_name()
        if named:
            return f"credential:{named}"
        carried = sorted(
            [(k.lower(), v) for k, v in prepared.headers.items()
             if k.lower() in {c.lower() for c in prepared.credential_headers}]
            + [(k, v) for k, v in prepared.params if k in prepared.credential_params]
        )  # fmt: skip
        if carried:
            digest = hashlib.sha256(json.dumps(carried).encode()).hexdigest()[:24]
            return f"credential:{digest}"
        return f"host:{host}"  # no credential sent: the host's quota
    if kind == "input" and limit is not None and limit.input_name is not None:
        value = json.dumps(arguments.get(limit.input_name), sort_keys=True, default=str)
        return f"input:{limit.input_name}={value}@{host}"
    return f"host:{host}"


@dataclass
class Paced:
    """One call's pacing (see the module doc); ``pacer`` None: nothing to do."""

    pacer: Pacer | None
    key: str
    limit: RateLimitConfig | None
    waited: float = 0.0
    _admitted: bool = field(default=False, repr=False)

    def admit(self) -> None:
        """Wait for the slot of the next request (``RateLimitWait`` past ``max_sleep``)."""
        if self.pacer is not None:
            self.waited += self.pacer.admit(self.key, self.limit)

    def observe(self, received: Received) -> None:
        """Pause the key when the answer's headers say its quota is used up."""
        if self.pacer is None:
            return
        seconds = pause_seconds(
            received.status, received.headers, now=time.time(), max_pause=self.pacer.max_pause
        )
        self.pacer.observe(self.key, seconds)


def paced_call(
    spec: ToolSpec, prepared: PreparedRequest, arguments: dict[str, Any], ctx: ToolCallContext
) -> Paced:
    if ctx.pacer is None:
        return Paced(None, "", None)
    return Paced(ctx.pacer, pace_key(spec, prepared, arguments), spec.rate_limit)
