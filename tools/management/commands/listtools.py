"""``listtools [--json]`` — the tools the planner and executor can use;
``listtools --versions NAME`` — a tool's versions; ``listtools --diff NAME A B`` — what
changed between two of them (``tools.versions``)."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import CommandError, CommandParser

from tools.commands import FlowpilotCommand
from tools.pins import VersionNotFound, tool_versions, tool_versions_diff
from tools.services import ToolEntry, tool_entries

HEADER = ("NAME", "KIND", "VERSION", "INPUTS", "OUTPUTS", "ORIGIN", "REFRESHED", "DESCRIPTION")


def _name(entry: ToolEntry) -> str:
    notes = [] if entry.enabled else ["disabled"]
    if entry.deprecated:
        notes.append(f"deprecated → {entry.replacement}" if entry.replacement else "deprecated")
    return entry.name + (f" ({'; '.join(notes)})" if notes else "")


class Command(FlowpilotCommand):
    help = (
        "List tools (stored and built-in): name (disabled, deprecated → replacement), kind, "
        "version, inputs (* = required), outputs, origin (file, MCP server, built-in "
        "provider), when it was last refreshed (UTC), description. --versions NAME lists a "
        "tool's versions with what changed in each; --diff NAME A B compares two (numbers "
        "or semantic versions)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="Print JSON instead of a table.")
        which = parser.add_mutually_exclusive_group()
        which.add_argument("--versions", metavar="NAME", help="The versions of one tool.")
        which.add_argument(
            "--diff", nargs=3, metavar=("NAME", "A", "B"),
            help="What changed in tool NAME from version A to version B.",
        )  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["versions"]:
                self._versions(options["versions"], as_json=options["json"])
                return
            if options["diff"]:
                name, old, new = options["diff"]
                self._diff(name, old, new, as_json=options["json"])
                return
        except VersionNotFound as exc:
            raise CommandError(str(exc)) from exc
        entries = tool_entries()
        if options["json"]:
            self.stdout.write(json.dumps([e.as_dict() for e in entries], indent=2))
            return
        rows = [
            (
                _name(e),
                e.kind,
                e.version or "-",
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

    def _versions(self, name: str, *, as_json: bool) -> None:
        rows = tool_versions(name=name)
        if not rows:
            raise VersionNotFound(f"tool `{name}` has no recorded versions")
        if as_json:
            self.stdout.write(json.dumps([_version_dict(r) for r in rows], indent=2))
            return
        for row in rows:
            when = row.created_at.strftime("%Y-%m-%d %H:%M")
            bump = f" ({row.bump})" if row.bump else ""
            self.stdout.write(f"{row.number:>3}  {row.version}{bump}  {when}  {row.source or '-'}")
            for change in row.changes or []:
                self.stdout.write(f"       {change['level']:<5}  {change['what']}")

    def _diff(self, name: str, old: str, new: str, *, as_json: bool) -> None:
        diff = tool_versions_diff(name=name, old=old, new=new)
        if as_json:
            self.stdout.write(json.dumps(diff.as_dict(), indent=2))
            return
        a, b = diff.old, diff.new
        head = f"{name}: {a.number} ({a.version}) → {b.number} ({b.version})"
        if not diff.changes:
            self.stdout.write(f"{head}: the same definition")
            return
        self.stdout.write(f"{head}: {diff.bump}")
        for change in diff.changes:
            self.stdout.write(f"  {change.level:<5}  {change.what}  [{change.path}]")
        self.stdout.write("")
        self.stdout.write(diff.text)


def _version_dict(row: Any) -> dict[str, Any]:
    return {
        "number": row.number,
        "version": row.version,
        "bump": row.bump or None,
        "hash": row.hash,
        "source": row.source,
        "created_at": row.created_at.isoformat(),
        "changes": row.changes or [],
    }
