"""What starts a workflow unattended and who hears about its runs: the ``schedule``,
``triggers`` and ``notifications`` blocks of a workflow file (``docs/schedules.md``,
``docs/triggers.md``, ``docs/notifications.md``). ``workflows.schema.WorkflowSpec``
carries them.
"""

from __future__ import annotations

from typing import Any, Literal

from django.core.exceptions import ValidationError as DjangoValidationError
from django.core.validators import URLValidator, validate_email
from pydantic import BaseModel, ConfigDict, Field, field_validator

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


class FrozenModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class Notifications(FrozenModel):
    """Who hears about this workflow's runs (``docs/notifications.md``)."""

    email: list[str] = Field(default_factory=list, description="Recipients of the reports.")
    webhook: str | None = Field(None, description="http(s) URL that receives a signed JSON POST.")
    webhook_secret_env: str | None = Field(
        None,
        pattern=r"^[A-Z_][A-Z0-9_]*$",
        description="Environment variable holding the HMAC key. Omitted: FLOWPILOT_WEBHOOK_SECRET.",
    )
    on: list[RunOutcome] = Field(
        default_factory=lambda: list[RunOutcome](["failed"]),
        description="failed: every failed run; recovered: the first success after a "
        "failure; succeeded: every successful run.",
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


class TriggerSpec(FrozenModel):
    """One event that starts a run of this workflow's active version, once per event."""

    on_workflow: OnWorkflow = Field(
        description="A run of another workflow finished (the only kind of event so far)."
    )
    inputs: dict[str, Any] = Field(
        default_factory=dict,
        description="The run's inputs: `$event.outputs.NAME` (an output of the finished "
        "run, with a deeper path if needed), `$event.run_id`, `$event.status`, … or a "
        "literal; checked against the declared inputs like any run's.",
    )
