"""``demo_data [--runs N] [--password PW] [--force]`` — data to try flowpilot with.

Users, the example tools, ``sales_report`` reviewed, approved and proved by its
validation run, the other examples waiting for review, a few runs (one failed) and a
schedule (``review.demo``). Refused on a database that does not look like a
development one unless ``--force``.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from review.demo import DemoReport, NotForDevelopment, demo_populate, development_guard
from tools.commands import FlowpilotCommand


class Command(FlowpilotCommand):
    help = (
        "Fill the database with data to try flowpilot with: demo users (demo_admin, "
        "demo_reviewer, demo_viewer), the example tools, sales_report reviewed, approved and "
        "proved by its validation run, the other examples waiting for review, a few runs "
        "(one failed) and a schedule. Can be run again (adds runs). Refused on a database "
        "that is not for development unless --force."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        add_demo_arguments(parser)

    def handle(self, *args: Any, **options: Any) -> None:
        guard(options)
        populate(self, options)


def guard(options: dict[str, Any]) -> None:
    """``development_guard`` as a command error."""
    try:
        development_guard(force=options["force"])
    except NotForDevelopment as exc:
        raise CommandError(str(exc)) from exc


def add_demo_arguments(parser: CommandParser) -> None:
    parser.add_argument(
        "--runs", type=int, default=5, help="Successful runs of sales_report to add (default 5)."
    )
    parser.add_argument(
        "--password",
        help="The demo users' password (set on users created, and on existing ones). "
        "Default: a random one for the users created, printed once.",
    )
    parser.add_argument(
        "--force", action="store_true", help="Even on a database that is not for development."
    )


def populate(command: FlowpilotCommand, options: dict[str, Any]) -> DemoReport:
    if options["runs"] < 0:
        raise CommandError("--runs must be 0 or more")
    report = demo_populate(runs=options["runs"], password=options["password"])
    write = command.stdout.write
    for username, action in report.users:
        write(f"user {username}: {action}")
    if report.password:
        write(command.style.WARNING(f"password of the users created: {report.password}"))
    tools = report.tools
    write(f"tools: {tools.created} created, {tools.updated} updated, {len(tools.tools)} in all")
    for error in tools.errors:
        write(command.style.ERROR(error.message))
    for name, version, status in report.workflows:
        write(f"workflow {name} v{version}: {status}")
    if report.validation is not None:
        write(f"validation run {report.validation.pk}: {report.validation.status}")
    for run in report.runs:
        write(f"run {run.pk}: {run.status}")
    for name, action in report.schedules:
        write(f"schedule {name}: {action}")
    write(
        "Next: `manage.py runserver`, then http://127.0.0.1:8000/admin/ as demo_admin "
        "(everything), demo_reviewer (review and approve) or demo_viewer (look)."
    )
    return report
