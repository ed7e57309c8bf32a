"""A small operations API on loopback for the control-flow tests (decisions, foreach, errors).

``install_control(fake)`` adds these routes to a ``FakeAPI``; the tool files under
``tests/data/tools/control/`` call them (base URL ``CONTROL_API_BASE_URL``):

===========  ======================  ==================================================
route        path                    answer
===========  ======================  ==================================================
``status``   ``GET /status/{name}``  a service's health (``SERVICES``); 404 if unknown
``item``     ``GET /items/{id}``     one item, echoing ``currency`` and ``index``; 404
                                     for ids in ``missing``; waits ``item_delay`` (plus
                                     ``item_delays[id]``) while counted in ``in_flight``
``catalog``  ``GET /items``          a JSON *list* of ``limit`` items (wrapped by the
                                     client as ``{"items": [...], "count": N}``)
``alert``    ``POST /alerts``        201 ``{"accepted": true, "id": N, "alert": body}``
===========  ======================  ==================================================

``fake.control`` (a ``ControlData``) holds what they serve and the in-flight gauge of
the ``item`` route, so a test can assert how many item requests ran at once.
"""

from __future__ import annotations

import copy
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from tests.fakes.http import FakeAPI, FakeResponse, RecordedRequest

SERVICES: dict[str, dict[str, Any]] = {
    "api": {"service": "api", "state": "ok", "latency_ms": 40,
            "tags": ["public", "critical"], "owner": "team-a"},
    "db": {"service": "db", "state": "degraded", "latency_ms": 850,
           "tags": ["critical"], "owner": "team-b"},
    "batch": {"service": "batch", "state": "down", "latency_ms": 0, "tags": [], "owner": None},
    "docs": {"service": "docs", "state": "ok", "latency_ms": 320, "tags": ["public"]},
    "queue": {"service": "queue", "state": "ok", "latency_ms": 120,
              "tags": ["critical", "internal"], "owner": None},
}  # fmt: skip


def item_record(item_id: int, currency: str = "EUR") -> dict[str, Any]:
    """What ``GET /items/{id}`` answers (without the echoed ``index``)."""
    return {
        "id": item_id,
        "name": f"item-{item_id}",
        "price": round(item_id * 1.25, 2),
        "currency": currency,
    }


class InFlight:
    """A thread-safe gauge: requests being answered now, and the most at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.current = 0
        self.peak = 0
        self.total = 0

    def __enter__(self) -> InFlight:
        with self._lock:
            self.current += 1
            self.total += 1
            self.peak = max(self.peak, self.current)
        return self

    def __exit__(self, *exc) -> None:
        with self._lock:
            self.current -= 1


@dataclass
class ControlData:
    services: dict[str, dict[str, Any]] = field(default_factory=lambda: copy.deepcopy(SERVICES))
    missing: set[int] = field(default_factory=set)  # item ids answered with 404
    item_delay: float = 0.0  # seconds every item request waits
    item_delays: dict[int, float] = field(default_factory=dict)  # extra wait per item id
    in_flight: InFlight = field(default_factory=InFlight)
    alerts: list[Any] = field(default_factory=list)


def _status(data: ControlData, req: RecordedRequest, match) -> FakeResponse:
    record = data.services.get(unquote(match.group("name")))
    if record is None:
        return FakeResponse.json({"message": "unknown service"}, 404)
    return FakeResponse.json(record)


def _item(data: ControlData, req: RecordedRequest, match) -> FakeResponse:
    item_id = int(match.group("id"))
    with data.in_flight:
        pause = data.item_delay + data.item_delays.get(item_id, 0.0)
        if pause:
            time.sleep(pause)
    if item_id in data.missing:
        return FakeResponse.json({"message": f"item {item_id} not found"}, 404)
    body = item_record(item_id, req.arg("currency") or "EUR")
    if req.arg("index") is not None:
        body["index"] = int(req.arg("index"))
    return FakeResponse.json(body)


def _catalog(data: ControlData, req: RecordedRequest, match) -> FakeResponse:
    limit = int(req.arg("limit") or 3)
    return FakeResponse.json([item_record(i) for i in range(1, limit + 1)])


def _alert(data: ControlData, req: RecordedRequest, match) -> FakeResponse:
    body = req.json()
    data.alerts.append(body)
    return FakeResponse.json({"accepted": True, "id": len(data.alerts), "alert": body}, 201)


def install_control(fake: FakeAPI, data: ControlData | None = None) -> ControlData:
    """Add the control routes to ``fake``; returns their data (also ``fake.control``)."""
    data = data or ControlData()
    fake.control = data  # type: ignore[attr-defined]
    table = [
        ("status", "GET", r"/status/(?P<name>[^/]+)", _status),
        ("item", "GET", r"/items/(?P<id>-?\d+)", _item),
        ("catalog", "GET", r"/items/?", _catalog),
        ("alert", "POST", r"/alerts/?", _alert),
    ]
    for name, method, pattern, handler in table:
        fake.route(name, method, pattern, _bind(handler, data))
    return data


def _bind(handler, data: ControlData):
    return lambda req, match: handler(data, req, match)
