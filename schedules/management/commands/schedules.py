"""``manage.py schedules list|add|pause|resume|remove|fires``: manage workflow schedules."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from schedules.models import Schedule
from schedules.next_fire import firing_warning, schedule_next_fire
from schedules.selectors import schedule_fires, schedule_get, schedule_list
from schedules.services import (
    Policy,
    ScheduleInvalid,
    schedule_create,
    schedule_pause,
    schedule_remove,
    schedule_resume,
)


class Command(BaseCommand):
    help = "List, add, pause, resume and remove workflow schedules; show a fire log."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        listing = sub.add_parser("list", help="every schedule (or one workflow's)")
        listing.add_argument("workflow", nargs="?")
        add = sub.add_parser("add", help="add a schedule to a stored workflow")
        add.add_argument("workflow")
        add.add_argument("name")
        rule = add.add_mutually_exclusive_group(required=True)
        rule.add_argument("--cron", default="", help='five fields, e.g. "0 9 * * 1-5"')
        rule.add_argument("--every", type=int, help="interval in seconds")
        add.add_argument("--timezone", default="UTC")
        add.add_argument("--input", action="append", default=[], metavar="K=V")
        add.add_argument("--overlap", default="skip", choices=["skip", "buffer_one", "allow_all"])
        add.add_argument("--catchup-window", type=int, default=3600, metavar="SECONDS")
        add.add_argument("--pause-after-failures", type=int, metavar="N")
        add.add_argument("--jitter", type=int, default=0, metavar="SECONDS")
        for action in ("pause", "resume", "remove", "fires"):
            one = sub.add_parser(action)
            one.add_argument("workflow")
            one.add_argument("name")

    def handle(self, *args: Any, action: str, **options: Any) -> None:
        try:
            getattr(self, f"_{action}")(**options)
        except ScheduleInvalid as exc:
            raise CommandError(str(exc)) from None

    def _warn_if_nothing_fires(self) -> None:
        warning = firing_warning()
        if warning:
            self.stderr.write(f"warning: {warning}")

    def _list(self, workflow: str | None = None, **_: Any) -> None:
        schedules = list(schedule_list(workflow_name=workflow))
        for s in schedules:
            state = f"paused ({s.paused_reason})" if s.paused else "active"
            upcoming = schedule_next_fire(schedule=s)
            following = f"{upcoming.local} ({upcoming.words})" if upcoming.at else "-"
            self.stdout.write(
                f"{s.workflow_name}/{s.name}  {s.when}  overlap={s.overlap}  {state}  "
                f"next fire={following}  "
                f"last fire={s.last_fire_time.isoformat() if s.last_fire_time else '-'}"
            )
        if schedules:
            self._warn_if_nothing_fires()

    def _add(
        self,
        workflow: str,
        name: str,
        cron: str,
        every: int | None,
        timezone: str,
        input: list[str],
        **options: Any,
    ) -> None:
        inputs = {}
        for item in input:
            key, sep, value = item.partition("=")
            if not sep:
                raise CommandError(f"--input {item!r} must look like key=value")
            inputs[key] = _value(value)
        policy = Policy(
            overlap=options["overlap"],
            catchup_window=options["catchup_window"],
            pause_after_failures=options["pause_after_failures"],
            jitter=options["jitter"],
        )
        schedule = schedule_create(
            workflow_name=workflow, name=name, cron=cron, tz=timezone, interval=every,
            inputs=inputs, policy=policy,
        )  # fmt: skip
        upcoming = schedule_next_fire(schedule=schedule)
        self.stdout.write(
            f"added {schedule} ({schedule.when}); next fire {upcoming.local} ({upcoming.words})"
        )
        self._warn_if_nothing_fires()

    def _pause(self, workflow: str, name: str, **_: Any) -> None:
        done = schedule_pause(schedule=self._one(workflow, name))
        self.stdout.write(f"{workflow}/{name} {'paused' if done else 'was already paused'}")

    def _resume(self, workflow: str, name: str, **_: Any) -> None:
        done = schedule_resume(schedule=self._one(workflow, name))
        self.stdout.write(f"{workflow}/{name} {'resumed' if done else 'was not paused'}")

    def _remove(self, workflow: str, name: str, **_: Any) -> None:
        schedule_remove(schedule=self._one(workflow, name))
        self.stdout.write(f"removed {workflow}/{name}")

    def _fires(self, workflow: str, name: str, **_: Any) -> None:
        for fire in schedule_fires(schedule=self._one(workflow, name)):
            run = f"run {fire.run_id}" if fire.run_id else "-"
            self.stdout.write(f"{fire.fire_time.isoformat()}  {fire.outcome}  {run}  {fire.detail}")

    def _one(self, workflow: str, name: str) -> Schedule:
        schedule = schedule_get(workflow_name=workflow, name=name)
        if schedule is None:
            raise CommandError(f"no schedule {workflow}/{name}")
        return schedule


def _value(text: str) -> Any:
    """A JSON value when the text parses as one (``3``, ``true``), else the string."""
    try:
        return json.loads(text)
    except ValueError:
        return text
