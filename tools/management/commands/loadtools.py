"""``loadtools DIR [DIR…]`` — load tool YAML files into the database."""

from __future__ import annotations

from django.core.management.base import CommandError

from tools.commands import FlowpilotCommand
from tools.services import tools_load_dir


class Command(FlowpilotCommand):
    help = (
        "Load http tool definitions (*.yaml, *.yml) from directories or files into the "
        "database, and sync the built-in tools. Exits 1 if any file failed."
    )

    def add_arguments(self, parser):
        parser.add_argument("paths", nargs="+", metavar="DIR", help="Directory or file.")
        parser.add_argument(
            "--no-builtin",
            action="store_true",
            help="Do not sync the built-in providers' tools.",
        )

    def handle(self, *args, **options):
        failed = 0
        sync_builtin = not options["no_builtin"]
        for index, path in enumerate(options["paths"]):
            # Built-in tools are synced once, with the last directory.
            last = index == len(options["paths"]) - 1
            report = tools_load_dir(directory=path, sync_builtin=sync_builtin and last)
            for tool in report.tools:
                line = f"{tool.action} {tool.name} ({tool.kind})"
                style = self.style.SUCCESS if tool.action != "unchanged" else str
                self.stdout.write(style(line))
            for error in report.errors:
                self.stderr.write(self.style.ERROR(f"error {error.message}"))
            failed += len(report.errors)
            self.stdout.write(
                f"{path}: {report.created} created, {report.updated} updated, "
                f"{report.unchanged} unchanged, {len(report.errors)} error(s)"
            )
        if failed:
            raise CommandError(f"{failed} file(s) could not be loaded")
