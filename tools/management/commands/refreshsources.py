"""``refreshsources [NAME…] [--due] [--list] [--json]`` — read tool sources again.

MCP server files and OpenAPI documents are recorded as sources when first read
(``tools.sources``); beat reads the due ones again on its own. This does it now: every
source, the named ones (name or location), or only the due ones. ``--list`` shows each
source's state without reading it. Exit 1 when a source could not be read.
"""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.utils import timezone

from tools.commands import FlowpilotCommand
from tools.models import ToolSource
from tools.source_refresh import sources_refresh
from tools.sources import source_state


class Command(FlowpilotCommand):
    help = (
        "Read tool sources (MCP server files, OpenAPI documents) again now: all, the named "
        "ones, or --due. --list shows each one's state (ok, stale, unavailable), its own "
        "version and tools, without reading. Exits 1 when a source could not be read."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("names", nargs="*", metavar="NAME", help="Name or location.")
        parser.add_argument("--due", action="store_true", help="Only the sources due.")
        parser.add_argument("--list", action="store_true", help="Show, do not read.")
        parser.add_argument("--json", action="store_true", help="Print JSON.")

    def handle(self, *args: Any, **options: Any) -> None:
        names = options["names"] or None
        if options["list"]:
            self._list(names, as_json=options["json"])
            return
        results = sources_refresh(names=names, due=options["due"])
        if names and not results:
            raise CommandError(f"no tool source is named {', '.join(names)}")
        if options["json"]:
            rows = [
                {"source": r.source.location, "ok": r.ok, "message": r.message,
                 "changed": list(r.changed)}
                for r in results
            ]  # fmt: skip
            self.stdout.write(json.dumps(rows, indent=2))
        for result in results:
            if options["json"]:
                break
            line = f"{result.source.kind} {result.source.name} ({result.source.location}): "
            style = self.style.SUCCESS if result.ok else self.style.ERROR
            self.stdout.write(style(line + result.message))
        if not results and not options["json"]:
            self.stdout.write("No tool source is due." if options["due"] else "No tool sources.")
        failed = [r for r in results if not r.ok]
        if failed:
            raise CommandError(f"{len(failed)} source(s) could not be read; their tools are kept")

    def _list(self, names: list[str] | None, *, as_json: bool) -> None:
        now = timezone.now()
        sources = [
            s for s in ToolSource.objects.order_by("kind", "name", "location")
            if names is None or s.name in names or s.location in names
        ]  # fmt: skip
        rows = [
            {
                "kind": s.kind,
                "name": s.name,
                "location": s.location,
                "state": source_state(s, now=now),
                "reported_name": s.reported_name,
                "reported_version": s.reported_version,
                "refreshed_at": s.refreshed_at.isoformat() if s.refreshed_at else None,
                "tools": s.tools,
            }
            for s in sources
        ]
        if as_json:
            self.stdout.write(json.dumps(rows, indent=2))
            return
        for row in rows:
            own = " ".join(p for p in (row["reported_name"], row["reported_version"]) if p)
            self.stdout.write(
                f"{row['kind']} {row['name']} ({row['location']}){f' [{own}]' if own else ''}: "
                f"{row['state']}; {len(row['tools'])} tool(s)"
            )
        if not rows:
            self.stdout.write("No tool sources.")
