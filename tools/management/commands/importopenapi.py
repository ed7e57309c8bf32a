"""``importopenapi SPEC --out DIR`` — write http tool files from an OpenAPI document."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO, cast

from django.core.management.base import CommandError, CommandParser

from tools.commands import FlowpilotCommand
from tools.errors import ToolConfigError
from tools.openapi.services import Progress, openapi_import

STAGES = {"generate": "operations", "check": "files checked"}


class Command(FlowpilotCommand):
    help = (
        "Write one http tool YAML per operation of an OpenAPI 3.0/3.1 document (a file, or a "
        "URL on FLOWPILOT_OPENAPI_HOSTS; at most FLOWPILOT_OPENAPI_MAX_BYTES), chosen by "
        "--tag / --operation / --path-prefix (default: all). Constructs that cannot be "
        "expressed are listed; an operation whose references cannot be expanded, or a part of "
        "which is malformed, is skipped with a warning on stderr naming where (--strict: "
        "nothing is written). A progress bar is shown on a terminal."
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
        parser.add_argument(
            "--path-prefix",
            action="append",
            default=[],
            help="Operations whose path begins with this (e.g. /v1/customers).",
        )
        parser.add_argument("--overwrite", action="store_true", help="Replace existing files.")
        parser.add_argument(
            "--strict",
            action="store_true",
            help="All or nothing: write no file when an operation cannot be imported.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        stream = cast("TextIO", self.stderr._out)  # the stream itself: the bar writes no "\n"
        try:
            with progress_bar(stream if self.stderr.isatty() else None) as progress:
                report = openapi_import(
                    source=options["source"],
                    out_dir=options["out"],
                    prefix=options["prefix"],
                    tags=options["tag"],
                    operations=options["operation"],
                    path_prefixes=options["path_prefix"],
                    overwrite=options["overwrite"],
                    strict=options["strict"],
                    progress=progress,
                )
        except ToolConfigError as exc:
            raise CommandError(exc.message) from exc
        for path in report.written:
            self.stdout.write(self.style.SUCCESS(f"wrote {path}"))
        for line in report.unsupported:
            self.stdout.write(self.style.WARNING(f"unsupported {line}"))
        for skipped in report.skipped:
            self.stderr.write(self.style.WARNING(f"skipped {skipped}"))
        if report.not_recorded:  # e.g. a database not migrated yet: the files are written
            self.stderr.write(self.style.WARNING(f"warning: {report.not_recorded}"))
        written, unsupported = len(report.written), len(report.unsupported)
        plural = "" if written == 1 else "s"
        self.stdout.write(
            f"imported {written} operation{plural}, skipped {len(report.skipped)}; "
            f"{unsupported} unsupported construct(s)"
        )


@contextmanager
def progress_bar(stream: TextIO | None) -> Iterator[Progress | None]:
    """A bar per stage on ``stream`` (a terminal), counting operations; nothing when
    ``stream`` is None (output piped or captured)."""
    if stream is None:
        yield None
        return
    from rich.console import Console  # loaded only for a terminal
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
    from rich.progress import Progress as Bar

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())  # fmt: skip
    with Bar(*columns, console=Console(file=stream, force_terminal=True)) as bar:
        tasks: dict[str, Any] = {}

        def update(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(STAGES.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done)

        yield update
