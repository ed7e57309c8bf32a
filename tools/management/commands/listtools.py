"""``listtools [--json]`` — the tools the planner and executor can use."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandParser

from tools.commands import FlowpilotCommand
from tools.services import ToolEntry, tool_entries

HEADER = ("NAME", "KIND", "INPUTS", "OUTPUTS", "ORIGIN", "REFRESHED", "DESCRIPTION")


def _name(entry: ToolEntry) -> str:
    notes = [] if entry.enabled else ["disabled"]
    if entry.deprecated:
        notes.append(f"deprecated → {entry.replacement}" if entry.replacement else "deprecated")
    return entry.name + (f" ({'; '.join(notes)})" if notes else "")


class Command(FlowpilotCommand):
    help = (
        "List tools (stored and built-in): name (disabled, deprecated → replacement), kind, "
        "inputs (* = required), outputs, origin (file, MCP server, built-in provider), when "
        "it was last refreshed (UTC), description."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args: Any, **options: Any) -> None:
        entries = tool_entries()
        if options["json"]:
            self.stdout.write(json.dumps([e.as_dict() for e in entries], indent=2))
            return
        rows = [
            (
                _name(e),
                e.kind,
                ", ".join(e.inputs) or "-",
                ", ".join(e.outputs) or "-",
                e.origin or "-",
                e.refreshed_at.strftime("%Y-%m-%d %H:%M") if e.refreshed_at else "-",
                e.description,
            )
            for e in entries
        ]
        last = len(HEADER) - 1
        widths = [max(len(r[i]) for r in [HEADER, *rows]) for i in range(last)]
        for row in [HEADER, *rows]:
            cells = [row[i].ljust(widths[i]) for i in range(last)]
            self.stdout.write("  ".join([*cells, row[last]]).rstrip())
        if not rows:
            self.stdout.write("No tools. Load some with `manage.py loadtools examples/tools`.")
