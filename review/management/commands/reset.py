"""``reset [--noinput] [--force] [--demo [--runs N] [--password PW]]`` — wipe a
development database.

Every row of every table goes (Django's ``flush``: users, workflows, runs, schedules,
tools, the beat schedule), and the circuit breakers' store is emptied too (it may be
Redis, which ``flush`` does not reach). With ``--demo`` the demo data is added again
(``demo_data``). Asks first unless ``--noinput``; refused on a database that does not
look like a development one unless ``--force`` (``review.demo.development_guard``).
"""

from __future__ import annotations

from typing import Any

from django.core.management import call_command
from django.core.management.base import CommandError, CommandParser
from django.db import connection

from review.management.commands.demo_data import add_demo_arguments, guard, populate
from tools.breaker.services import breakers_reset
from tools.breaker.setup import breaker_store_from_settings
from tools.commands import FlowpilotCommand


class Command(FlowpilotCommand):
    help = (
        "Wipe a development database: every row of every table, and the circuit breakers' "
        "store. --demo adds the demo data again. Asks first unless --noinput; refused on a "
        "database that is not for development unless --force."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--noinput", "--no-input", action="store_false", dest="interactive",
            help="Do not ask for confirmation.",
        )  # fmt: skip
        parser.add_argument(
            "--demo", action="store_true", help="Add the demo data afterwards (demo_data)."
        )
        add_demo_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        guard(options)
        name = connection.settings_dict.get("NAME") or "?"
        if options["interactive"]:
            answer = input(
                f"This deletes every row of the database `{name}` ({connection.vendor}). "
                "Type 'yes' to go on: "
            )
            if answer.strip() != "yes":
                raise CommandError("reset cancelled; nothing was deleted")
        call_command("flush", interactive=False, verbosity=0)
        closed = self._breakers()
        self.stdout.write(f"database `{name}` emptied; {closed} circuit breaker(s) closed")
        if options["demo"]:
            populate(self, options)

    def _breakers(self) -> int:
        store = breaker_store_from_settings()
        if store is None:
            return 0
        try:
            return breakers_reset(store=store, hosts=None)
        finally:
            store.close()
