"""health [COMPONENT …] [--json] [--node WORKER]: is flowpilot able to work?

One line per component (database, broker, workers, beat, llm, breakers): ok,
failing or not_configured, with the reason. Exit status 1 when a component fails
(one the configuration does not use is ``not_configured``, not a failure).
"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from health.checks import COMPONENTS, health_report


class Command(BaseCommand):
    help = (
        "Check the database, the broker, live workers and their queues, beat's last tick, "
        "the LLM endpoint and the circuit breakers; exit status 1 when one is failing."
    )
    requires_system_checks: list[str] = []  # a health check must answer when the rest cannot

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "components",
            nargs="*",
            metavar="COMPONENT",
            help=f"Only these ({', '.join(COMPONENTS)}); default: all.",
        )
        parser.add_argument("--json", action="store_true", help="The report as JSON.")
        parser.add_argument(
            "--node",
            help="A worker (e.g. worker@host) that must answer: a worker's own healthcheck.",
        )

    def handle(
        self,
        *args: Any,
        components: list[str],
        json: bool = False,
        node: str | None = None,
        **options: Any,
    ) -> None:
        try:
            report = health_report(components=components, node=node)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if json:
            self.stdout.write(_dumps(report.as_dict()))
        else:
            width = max(len(c.component) for c in report.checks)
            for check in report.checks:
                self.stdout.write(f"{check.component:<{width}}  {check.status:<14}  {check.reason}")
        if not report.ok:
            failing = ", ".join(c.component for c in report.checks if c.failing)
            raise CommandError(f"failing: {failing}", returncode=1)


def _dumps(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False)
