"""``listtools [--json]`` — the tools the planner and executor can use."""

from __future__ import annotations

import json

from tools.commands import FlowpilotCommand
from tools.services import tool_entries


class Command(FlowpilotCommand):
    help = "List tools (stored and built-in): name, kind, description, inputs (* = required)."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")

    def handle(self, *args, **options):
        entries = tool_entries()
        if options["json"]:
            self.stdout.write(json.dumps([e.as_dict() for e in entries], indent=2))
            return
        rows = [
            (
                e.name + ("" if e.enabled else " (disabled)"),
                e.kind,
                ", ".join(e.inputs) or "-",
                ", ".join(e.outputs) or "-",
                e.description,
            )
            for e in entries
        ]
        header = ("NAME", "KIND", "INPUTS", "OUTPUTS", "DESCRIPTION")
        widths = [max(len(r[i]) for r in [header, *rows]) for i in range(4)]
        for row in [header, *rows]:
            cells = [row[i].ljust(widths[i]) for i in range(4)]
            self.stdout.write("  ".join([*cells, row[4]]).rstrip())
        if not rows:
            self.stdout.write("No tools. Load some with `manage.py loadtools examples/tools`.")
