"""``loadtools DIR [DIR…] [--prune [--force]]`` — load tool files into the database.

It lives in the ``workflows`` app because ``--prune`` must know which active workflows
use a tool (``workflows.tool_lifecycle``); loading itself is ``tools.services``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from tools.commands import FlowpilotCommand
from tools.services import LoadReport, tools_load_dir
from workflows.tool_lifecycle import tools_prune


class Command(FlowpilotCommand):
    help = (
        "Load http tool definitions and MCP server files (*.yaml, *.yml) from directories or "
        "files into the database, and sync the built-in tools. With --prune, remove the tools "
        "that came from under each DIR whose file is gone (or no longer defines them). Exits 1 "
        "if any file failed or a prune was refused."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", metavar="DIR", help="Directory or file.")
        parser.add_argument(
            "--no-builtin",
            action="store_true",
            help="Do not sync the built-in providers' tools.",
        )
        parser.add_argument(
            "--prune",
            action="store_true",
            help="Remove tools loaded from under DIR whose file is gone; refused for a tool "
            "an active workflow uses.",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="With --prune: remove such tools even when active workflows use them "
            "(warning, naming the workflows).",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["force"] and not options["prune"]:
            raise CommandError("--force only applies with --prune")
        failed = refused = 0
        sync_builtin = not options["no_builtin"]
        for index, path in enumerate(options["paths"]):
            # Built-in tools are synced once, with the last directory.
            last = index == len(options["paths"]) - 1
            report = tools_load_dir(directory=path, sync_builtin=sync_builtin and last)
            self._print_load(path, report)
            failed += len(report.errors)
            if options["prune"]:
                refused += self._prune(path, report, force=options["force"])
        problems = []
        if failed:
            problems.append(f"{failed} file(s) could not be loaded")
        if refused:
            problems.append(f"{refused} tool(s) not pruned: active workflows use them")
        if problems:
            raise CommandError("; ".join(problems))

    def _print_load(self, path: str, report: LoadReport) -> None:
        for tool in report.tools:
            line = f"{tool.action} {tool.name} ({tool.kind})"
            style = self.style.SUCCESS if tool.action != "unchanged" else str
            self.stdout.write(style(line))
        for error in report.errors:
            self.stderr.write(self.style.ERROR(f"error {error.message}"))
        self.stdout.write(
            f"{path}: {report.created} created, {report.updated} updated, "
            f"{report.unchanged} unchanged, {len(report.errors)} error(s)"
        )

    def _prune(self, path: str, report: LoadReport, *, force: bool) -> int:
        pruned = tools_prune(directory=path, report=report, force=force)
        for tool in pruned.tools:
            if not tool.removed:
                self.stderr.write(self.style.ERROR(f"error {tool.message()}"))
            elif tool.used_by:
                self.stderr.write(self.style.WARNING(f"warning {tool.message()}"))
            else:
                self.stdout.write(self.style.SUCCESS(tool.message()))
        removed = sum(1 for t in pruned.tools if t.removed)
        self.stdout.write(f"{path}: {removed} pruned, {len(pruned.refused)} kept")
        return len(pruned.refused)
