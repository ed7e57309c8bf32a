"""``manage.py schedules``: add, list, pause, resume, fires, remove, and clear errors."""

import re

import pytest
from django.core.management import CommandError, call_command

from schedules.models import Schedule

pytestmark = pytest.mark.django_db


def run(*args, capsys):
    call_command("schedules", *args)
    return capsys.readouterr().out


def test_add_and_list_warn_when_nothing_will_fire(active_flow, capsys):
    """Tests run with no broker (eager Celery): no beat, so nothing would ever fire."""
    call_command("schedules", "add", "nightly", "morning", "--cron", "0 9 * * *")
    added = capsys.readouterr()
    assert added.out.startswith("added nightly/morning")
    assert added.err.startswith("warning: No broker is configured (CELERY_BROKER_URL)")
    call_command("schedules", "list")
    assert capsys.readouterr().err.count("warning: No broker is configured") == 1


def test_the_schedule_lifecycle_from_the_command_line(active_flow, capsys):
    out = run("add", "nightly", "morning", "--cron", "0 9 * * 1-5", "--timezone",
              "Europe/Paris", "--input", "n=3", "--overlap", "buffer_one",
              "--pause-after-failures", "3", "--jitter", "5", capsys=capsys)  # fmt: skip
    assert re.fullmatch(
        r"added nightly/morning \(0 9 \* \* 1-5 \(Europe/Paris\)\); next fire "
        r"\d{4}-\d\d-\d\d 09:00 Europe/Paris \(in [^)]+\)\n",
        out,
    ), out
    schedule = Schedule.objects.get()
    assert (schedule.inputs, schedule.overlap, schedule.pause_after_failures) == (
        {"n": 3}, "buffer_one", 3,
    )  # fmt: skip

    listed = run("list", capsys=capsys)
    assert "nightly/morning  0 9 * * 1-5 (Europe/Paris)  overlap=buffer_one  active" in listed
    assert re.search(r"next fire=\d{4}-\d\d-\d\d 09:00 Europe/Paris \(in [^)]+\)", listed)
    assert run("pause", "nightly", "morning", capsys=capsys) == "nightly/morning paused\n"
    assert "paused (paused by an operator)" in run("list", "nightly", capsys=capsys)
    assert "was already paused" in run("pause", "nightly", "morning", capsys=capsys)
    assert run("resume", "nightly", "morning", capsys=capsys) == "nightly/morning resumed\n"
    assert "was not paused" in run("resume", "nightly", "morning", capsys=capsys)
    fires = run("fires", "nightly", "morning", capsys=capsys).splitlines()
    assert [line.split("  ")[1] for line in fires] == ["resumed", "paused"]
    assert run("remove", "nightly", "morning", capsys=capsys) == "removed nightly/morning\n"
    assert not Schedule.objects.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cron", "* * * * * *"], "a sixth field means seconds"),
        (["--every", "0"], "`interval` must be at least 1 second"),
        (["--cron", "0 0 30 2 *"], "never fires: no date matches"),
        (["--every", "100000000000000000000000"], "`interval` must be at most 31622400 seconds"),
        (["--every", "5", "--catchup-window", str(10**23)], "`catchup_window` must be at most"),
        (["--every", "5", "--jitter", "3601"], "`jitter` must be at most 3600 seconds"),
        (["--every", "5", "--pause-after-failures", str(10**23)], "`pause_after_failures` must"),
        (["--cron", "0 9 * * *", "--timezone", "Moon/Base"], "unknown timezone 'Moon/Base'"),
        (["--every", "5", "--input", "oops"], "--input 'oops' must look like key=value"),
    ],
)
def test_hostile_input_is_a_command_error(active_flow, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("schedules", "add", "nightly", "s", *args)


def test_an_unknown_schedule_is_a_command_error(active_flow):
    with pytest.raises(CommandError, match="no schedule nightly/ghost"):
        call_command("schedules", "pause", "nightly", "ghost")
