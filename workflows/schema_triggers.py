"""What starts a workflow unattended and who hears about its runs: the ``schedule``,
``triggers`` and ``notifications`` blocks of a workflow file (``docs/schedules.md``,
``docs/triggers.md``, ``docs/notifications.md``). ``workflows.schema.WorkflowSpec``
carries them.
"""

from __future__ import annotations

from typing import Any, Literal

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator, validate_email
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from tools.paths import PathError, parse_path
from tools.spec import TOOL_NAME_PATTERN
from workflows.cron import cron_check, timezone_check

# The bounds of a schedule's numbers, one rule for the file's ``schedule:`` and every
# surface that creates a schedule (``schedules.services.schedule_check``): past them a
# schedule would fire absurdly (an interval of a century) or hold values no column can.
MAX_INTERVAL_SECONDS = 366 * 86400  # longer than a year: a cron expression says it better
MAX_CATCHUP_SECONDS = 366 * 86400
MAX_JITTER_SECONDS = 3600
MAX_PAUSE_AFTER_FAILURES = 1000

# What a finished run turns out to be, for a notification's ``on``.
RunOutcome = Literal["failed", "recovered", "succeeded"]
# The end of another workflow's run that starts one of this workflow (``on_workflow``).
FinishedStatus = Literal["succeeded", "failed"]
# What an ``on_workflow`` trigger's inputs read of the finished run: ``$event.<field>``.
EVENT_FIELDS = (
    "run_id", "run_uuid", "workflow", "version", "status", "outputs", "error", "finished_at",
)  # fmt: skip
# How often a poll trigger may call its tool: at most every 10 s, at least once a week.
MIN_POLL_SECONDS = 10
MAX_POLL_SECONDS = 7 * 86400
# Where a poll's next cursor is read: the tool's output, the last item, or the greatest
# value over the items.
CURSOR_SOURCES = ("$output", "$last", "$max")
_DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class FrozenModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Channels(FrozenModel):
    """Who is told (an approval step's ``notify``): email recipients and a webhook."""

    email: list[str] = Field(default_factory=list, description="Email recipients.")
    webhook: str | None = Field(None, description="http(s) URL that receives a signed JSON POST.")
    webhook_secret_env: str | None = Field(
        None,
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="Environment variable holding the HMAC key. Omitted: FLOWPILOT_WEBHOOK_SECRET.",
    )

    def has_channels(self) -> bool:
        """Whether any report can be sent (an email recipient or a webhook)."""
        return bool(self.email or self.webhook)

    @field_validator("email")
    @classmethod
    def _emails(cls, value: list[str]) -> list[str]:
        for address in value:
            try:
                validate_email(address)
            except DjangoValidationError:
                raise ValueError(f"{address!r} is not an email address") from None
        return value

    @field_validator("webhook")
    @classmethod
    def _webhook(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                URLValidator(schemes=["http", "https"])(value)
            except DjangoValidationError:
                raise ValueError(f"{value!r} is not an http(s) URL") from None
        return value


class Notifications(Channels):
    """Who hears about this workflow's runs (``docs/notifications.md``)."""

    on: list[RunOutcome] = Field(
        default_factory=lambda: list[RunOutcome](["failed"]),
        description="failed: every failed run; recovered: the first success after a "
        "failure; succeeded: every successful run.",
    )


class ScheduleSpec(FrozenModel):
    """The schedule a file declares; activating the version creates or updates it."""

    cron: str = Field(description="Five-field cron expression, e.g. `0 9 * * 1-5`.")
    timezone: str = Field("UTC", description="IANA timezone the cron expression reads in.")
    inputs: dict[str, Any] = Field(default_factory=dict, description="Run inputs of each fire.")
    overlap: Literal["skip", "buffer_one", "allow_all"] = "skip"
    catchup_window: int = Field(
        3600, ge=0, le=MAX_CATCHUP_SECONDS, description="Seconds a missed fire may still run late."
    )
    pause_after_failures: int | None = Field(
        None,
        ge=1,
        le=MAX_PAUSE_AFTER_FAILURES,
        description="Pause after this many failed runs in a row.",
    )
    jitter: int = Field(
        0, ge=0, le=MAX_JITTER_SECONDS, description="Random delay of each start, seconds."
    )

    @field_validator("cron")
    @classmethod
    def _cron(cls, value: str) -> str:
        return cron_check(value)

    @field_validator("timezone")
    @classmethod
    def _timezone(cls, value: str) -> str:
        return timezone_check(value)


class OnWorkflow(FrozenModel):
    """Another workflow whose finished runs start this one (``docs/triggers.md``)."""

    name: str = Field(
        pattern=r"^[a-z][a-z0-9_-]{0,99}$",
        description="The workflow whose runs, once finished, start this one.",
    )
    status: list[FinishedStatus] = Field(
        default_factory=lambda: list[FinishedStatus](["succeeded"]),
        min_length=1,
        description="Which ends start it: succeeded, failed, or both.",
    )

    @field_validator("status", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def _path_check(value: str | None) -> str | None:
    if value is not None:
        try:
            parse_path(value)
        except PathError as exc:
            raise ValueError(str(exc)) from None
    return value


class PollCursor(FrozenModel):
    """Where a poll resumes: ``$cursor`` in the tool's arguments reads the value stored
    after the last poll (``initial`` before the first)."""

    initial: Any = Field(None, description="The cursor of the first poll.")
    next: str = Field(
        description="Where the next cursor is read once a poll's runs are created: "
        "`$output.PATH` (the tool's output), `$last.PATH` (the last item of the page) or "
        "`$max.PATH` (the greatest value over the page's items). A page with no value "
        "there keeps the cursor."
    )

    @field_validator("next")
    @classmethod
    def _next(cls, value: str) -> str:
        head, _, rest = value.partition(".")
        if head not in CURSOR_SOURCES or (head != "$output" and not rest):
            raise ValueError(
                f"{value!r} is not a cursor source: write `$output.PATH`, `$last.PATH` or "
                "`$max.PATH`"
            )
        _path_check(rest or None)
        return value


class PollSpec(FrozenModel):
    """An http tool called every ``every`` seconds; each item of its answer not seen
    before, by ``dedup_key``, starts one run (``docs/triggers.md``)."""

    tool: str = Field(pattern=TOOL_NAME_PATTERN, description="The http tool that is called.")
    every: int = Field(
        ge=MIN_POLL_SECONDS,
        le=MAX_POLL_SECONDS,
        description="Seconds between polls, or a duration: `30s`, `5m`, `1h`, `1d`.",
    )
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="The tool's arguments; `$cursor` (or `$cursor.PATH`) reads the cursor.",
    )
    items: str | None = Field(
        None,
        description="Dot path of the list of items in the tool's output; omitted: the "
        "output is the list.",
    )
    dedup_key: str = Field(
        description="Dot path, in each item, of what names it: an item whose key was seen "
        "before starts nothing."
    )
    cursor: PollCursor | None = Field(None, description="Where the next poll resumes.")

    @field_validator("every", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        if isinstance(value, str):
            text = value.strip()
            unit = _DURATION_UNITS.get(text[-1:])
            if unit is None or not text[:-1].isdigit():
                raise ValueError(
                    f"{value!r} is not a duration: write seconds, or `30s`, `5m`, `1h`"
                )
            return int(text[:-1]) * unit
        return value

    @field_validator("items", "dedup_key")
    @classmethod
    def _paths(cls, value: str | None) -> str | None:
        return _path_check(value)


class TriggerSpec(FrozenModel):
    """One event that starts a run of this workflow's active version, once per event:
    another workflow's run finished (``on_workflow``), or a poll found a new item
    (``poll``)."""

    on_workflow: OnWorkflow | None = Field(None, description="A run of another workflow finished.")
    poll: PollSpec | None = Field(None, description="A poll of an http tool found a new item.")
    inputs: dict[str, Any] = Field(
        default_factory=dict,
        description="The run's inputs: for `on_workflow`, `$event.outputs.NAME` (an output "
        "of the finished run, with a deeper path if needed), `$event.run_id`, "
        "`$event.status`, …; for `poll`, `$item` or `$item.PATH`; or a literal; checked "
        "against the declared inputs like any run's.",
    )

    @model_validator(mode="after")
    def _one_event(self) -> TriggerSpec:
        if (self.on_workflow is None) == (self.poll is None):
            raise ValueError("a trigger names one event: `on_workflow` or `poll`")
        return self

    @property
    def kind(self) -> str:
        return "poll" if self.poll is not None else "on_workflow"
