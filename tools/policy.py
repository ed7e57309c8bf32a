"""Retry policy: an immutable value shared by tool definitions and workflow steps."""

from pydantic import BaseModel, ConfigDict, Field


class RetryPolicy(BaseModel):
    """How a call retries retryable errors: exponential backoff with jitter."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_attempts: int = Field(1, ge=1, le=20, description="Total tries, the first included.")
    initial_delay: float = Field(0.5, ge=0, le=3600, description="Seconds before the 2nd try.")
    max_delay: float = Field(30.0, ge=0, le=3600, description="Upper bound of one delay.")
    multiplier: float = Field(2.0, ge=1, le=10, description="Growth factor per try.")
    jitter: float = Field(
        0.1, ge=0, le=1, description="Random share (0..1) added to or taken from a delay."
    )

    def delay(self, attempt: int, rand: float) -> float:
        """Seconds to wait after failed try number ``attempt`` (1-based).

        ``rand`` is a number in [0, 1) from the caller's injected random source,
        so tests can pin it.
        """
        base = min(self.max_delay, self.initial_delay * self.multiplier ** (attempt - 1))
        return max(0.0, base * (1 + self.jitter * (2 * rand - 1)))
