"""``importopenapi SPEC --out DIR`` — write http tool files from an OpenAPI document."""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from tools.commands import FlowpilotCommand
from tools.errors import ToolConfigError
from tools.openapi.services import openapi_import


class Command(FlowpilotCommand):
    help = (
        "Write one http tool YAML per operation of an OpenAPI 3.0/3.1 document (a file, or a "
        "URL on FLOWPILOT_OPENAPI_HOSTS), chosen by --tag / --operation (default: all). "
        "Constructs that cannot be expressed are listed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("source", help="File path or http(s) URL of the document.")
        parser.add_argument("--out", required=True, help="Directory for the tool files.")
        parser.add_argument(
            "--prefix", required=True, help="Env prefix: <PREFIX>_BASE_URL, <PREFIX>_TOKEN, …"
        )
        parser.add_argument("--tag", action="append", default=[], help="Operations by tag.")
        parser.add_argument(
            "--operation",
            action="append",
            default=[],
            help='Operations by operationId (or "METHOD /path").',
        )
        parser.add_argument("--overwrite", action="store_true", help="Replace existing files.")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            report = openapi_import(
                source=options["source"],
                out_dir=options["out"],
                prefix=options["prefix"],
                tags=options["tag"],
                operations=options["operation"],
                overwrite=options["overwrite"],
            )
        except ToolConfigError as exc:
            raise CommandError(exc.message) from exc
        for path in report.written:
            self.stdout.write(self.style.SUCCESS(f"wrote {path}"))
        for line in report.unsupported:
            self.stdout.write(self.style.WARNING(f"unsupported {line}"))
        written, unsupported = len(report.written), len(report.unsupported)
        self.stdout.write(f"{written} tool file(s), {unsupported} unsupported construct(s)")
