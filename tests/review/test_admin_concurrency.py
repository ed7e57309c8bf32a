"""The review page says, before approval, what the version's concurrency limit implies."""

from __future__ import annotations

import pytest

from review.selectors import concurrency_text
from tests.factories import pending_version, sales_report_data
from tests.review.test_admin import login, url
from workflows.schema import WorkflowSpec

pytestmark = pytest.mark.django_db


def limited(**limit) -> dict:
    data = sales_report_data()
    data["inputs"] = {**data.get("inputs", {}), "account": {"type": "string", "default": "a"}}
    data["concurrency"] = limit
    return data


def test_a_version_in_review_shows_its_concurrency_limit_before_approval(reviewer):
    version = pending_version(limited(max_runs=3, key="$input.account"))

    page = login(reviewer).get(url("change", version)).content.decode()

    assert version.status == "pending_review"
    assert (
        '<li id="fp-limit-concurrency"><strong>Concurrency:</strong> At most 3 runs at once '
        "per `account`; further runs queue and start, oldest first, as slots free.</li>"
    ) in page


def test_skip_and_fail_say_what_happens_to_a_run_past_the_limit(reviewer):
    skip = pending_version(limited(max_runs=1, on_limit="skip"))
    fail = pending_version({**limited(max_runs=20, on_limit="fail"), "name": "sales_fail"})

    client = login(reviewer)
    skipped = client.get(url("change", skip)).content.decode()
    failed = client.get(url("change", fail)).content.decode()

    assert "At most 1 run at once; further runs are skipped (recorded, never started)." in skipped
    assert "At most 20 runs at once; further runs fail at once, naming the limit." in failed


def test_a_version_without_a_limit_says_every_run_starts_at_once(reviewer):
    version = pending_version(sales_report_data())

    page = login(reviewer).get(url("change", version)).content.decode()

    assert "No concurrency limit: every run starts at once, however many are running." in page


def test_a_definition_that_does_not_parse_says_nothing_about_limits():
    assert concurrency_text(None) == ""
    spec = WorkflowSpec.model_validate(limited(max_runs=2))
    assert concurrency_text(spec) == (
        "At most 2 runs at once; further runs queue and start, oldest first, as slots free."
    )
