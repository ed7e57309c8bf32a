"""When a cron expression fires across daylight-saving changes: one rule, as instants.

A cron expression is read in its zone's wall time; its fire times are UTC instants.
Twice a year a zone's wall clock repeats an hour (autumn) or skips one (spring), so a
matching wall time may name two instants or none. The rule (``docs/schedules.md``,
"Daylight-saving changes"), the one Vixie cron follows:

* An expression whose hour field starts with ``*`` (``0 * * * *``, ``*/15 * * * *``,
  ``0 */2 * * *``) counts elapsed time: it fires at every instant whose wall time
  matches — both occurrences of a repeated time, none of a skipped one. An hourly
  schedule fires every hour of a 23- or 25-hour day, never twice in one hour.
* Any other expression (``30 2 * * *``, ``0 1-3 * * *``) names times of day: each
  matching wall time of a date fires exactly once — a repeated time at its first
  occurrence, a skipped time at the instant the clock jumps past it.

Both ``cron_latest`` and ``cron_between`` read the same instants from here, so the
fire a beat message maps to and the fires logged as missed never disagree.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

# More than a zone's clock ever moves at once in either direction (tzdata since 1970:
# 3 h, Antarctica/Casey; Samoa's skipped day of 2011 is outside it): matches whose wall
# time is this much later than an instant may still fall before it, so the search
# starts that far on and holds its answers that long.
MAX_SETBACK = timedelta(hours=4)


def counts_elapsed_time(expression: str) -> bool:
    """True when the hour field starts with ``*``: the expression fires by elapsed time."""
    return expression.split()[1].startswith("*")


def wall_instants(wall: datetime, zone: ZoneInfo, *, elapsed: bool) -> list[datetime]:
    """The UTC instants the naive wall time ``wall`` fires at in ``zone`` (the rule)."""
    first, second = (wall.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1))
    if first.astimezone(zone).replace(tzinfo=None) == wall:  # the wall time exists
        if first == second or not elapsed:
            return [first]
        return [first, second]  # repeated: fold 0 is the first occurrence
    return [] if elapsed else [_jump(after=second, before=first, zone=zone)]


def _jump(*, after: datetime, before: datetime, zone: ZoneInfo) -> datetime:
    """The instant a skipped wall time's clock jumps: the first whole minute in
    [``after``, ``before``] whose offset is the new one (a bisection over minutes)."""
    offset = before.astimezone(zone).utcoffset()
    low, high = after, before
    while high - low > timedelta(minutes=1):
        middle = low + (high - low) / 2
        middle = middle.replace(second=0, microsecond=0)
        if middle.astimezone(zone).utcoffset() == offset:
            high = middle
        else:
            low = middle
    return high


def _latest_reading(wall: datetime, zone: ZoneInfo) -> datetime:
    """The later of the two readings of ``wall`` (fold 0 and 1) as an instant: no wall
    time before ``wall`` fires more than ``MAX_SETBACK`` after it."""
    return max(wall.replace(tzinfo=zone, fold=fold).astimezone(UTC) for fold in (0, 1))


def fires_before(expression: str, zone: ZoneInfo, until: datetime) -> Iterator[datetime]:
    """The expression's fire instants strictly before ``until``, newest first (UTC).

    Wall times are walked back with croniter on naive local time (no zone arithmetic
    inside croniter); each is turned into its instants by ``wall_instants``. Instants
    are held until no earlier wall time can produce a later one (``MAX_SETBACK``).
    """
    elapsed = counts_elapsed_time(expression)
    start = until.astimezone(zone).replace(tzinfo=None) + MAX_SETBACK
    walls = croniter(expression, start)
    pending: set[datetime] = set()
    while True:
        wall = walls.get_prev(datetime)
        pending.update(t for t in wall_instants(wall, zone, elapsed=elapsed) if t < until)
        horizon = _latest_reading(wall, zone) + MAX_SETBACK
        for instant in sorted((t for t in pending if t >= horizon), reverse=True):
            pending.discard(instant)
            yield instant
