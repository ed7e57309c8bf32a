"""``breakers list [--json]`` and ``breakers reset HOST... | --all`` — the circuit breakers.

Reads and resets the store the workers use (Redis or the database, by settings).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from django.core.management.base import CommandError, CommandParser

from tools.breaker.core import BreakerState, BreakerStore
from tools.breaker.selectors import breakers_list
from tools.breaker.services import breakers_reset
from tools.breaker.setup import breaker_backend, breaker_store_from_settings
from tools.commands import FlowpilotCommand


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value is not None else "-"


def _as_dict(state: BreakerState) -> dict:
    return {
        "host": state.host,
        "state": state.state,
        "failures": state.failures,
        "opened_at": state.opened_at.isoformat() if state.opened_at else None,
        "retry_at": state.tried_again_at.isoformat() if state.tried_again_at else None,
    }


class Command(FlowpilotCommand):
    help = "List or reset the circuit breakers of external hosts (host:port)."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        listing = sub.add_parser("list", help="Hosts whose breaker counts failures or is open.")
        listing.add_argument("--json", action="store_true", help="Print JSON.")
        reset = sub.add_parser("reset", help="Close breakers: the next call goes through.")
        reset.add_argument("hosts", nargs="*", metavar="HOST", help="host:port, as listed.")
        reset.add_argument("--all", action="store_true", help="Reset every breaker.")

    def handle(self, *args: Any, **options: Any) -> None:
        store = breaker_store_from_settings()
        if store is None:
            raise CommandError("circuit breakers are off (FLOWPILOT_BREAKER_BACKEND=off)")
        try:
            if options["action"] == "list":
                self._list(breakers_list(store=store), as_json=options["json"])
            else:
                self._reset(store, options["hosts"], everything=options["all"])
        finally:
            store.close()

    def _list(self, states: list[BreakerState], *, as_json: bool) -> None:
        if as_json:
            self.stdout.write(json.dumps([_as_dict(s) for s in states], indent=2))
            return
        if not states:
            self.stdout.write(f"No breaker is counting failures ({breaker_backend()} store).")
            return
        rows = [
            (s.host, s.state, str(s.failures), _iso(s.opened_at), _iso(s.tried_again_at))
            for s in states
        ]
        header = ("HOST", "STATE", "FAILURES", "OPENED AT", "RETRY AT")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(5)]
        for row in [header, *rows]:
            cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
            self.stdout.write("  ".join(cells).rstrip())

    def _reset(self, store: BreakerStore, hosts: list[str], *, everything: bool) -> None:
        if everything == bool(hosts):
            raise CommandError(
                "name the hosts to reset (host:port, as `breakers list` shows) or --all"
            )
        count = breakers_reset(store=store, hosts=None if everything else hosts)
        self.stdout.write(f"Reset {count} breaker{'' if count == 1 else 's'}.")
        if hosts and count < len(set(hosts)):
            self.stdout.write("Hosts without a breaker to reset were ignored.")
