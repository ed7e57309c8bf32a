"""importflow --activate: restricted to a superuser, recorded as an import_superuser
approval and announced with a warning; it never counts towards an approval policy."""

from __future__ import annotations

import pytest

from review.imports import workflow_activate_imported
from review.models import Approval
from review.policy import approval_tally
from tests.conftest import EXAMPLES_DIR
from tests.factories import UserFactory, pending_version
from workflows.models import Workflow
from workflows.revisions import ApprovalForbidden

pytestmark = [pytest.mark.django_db(transaction=True)]

SALES = str(EXAMPLES_DIR / "sales_report.yaml")


def test_activate_as_a_superuser_is_recorded_loudly(cli, caplog):
    root = UserFactory(username="root", superuser=True)

    with caplog.at_level("INFO", logger="flowpilot.approval"):
        result = cli("importflow", SALES, "--activate", "--as", "root")
    again = cli("importflow", SALES, "--activate", "--as", "root")

    assert result.code == 0, result.err
    assert result.lines == [
        "stored and activated sales_report v1 (active: activated by import, no validation run)"
    ]
    approval = Approval.objects.get()
    assert (approval.kind, approval.status, approval.approved_by) == (
        "import_superuser",
        "passed",
        root,
    )
    version = Workflow.objects.get()
    assert approval.definition_hash == version.definition_hash
    assert approval.validation_run is None
    assert version.approved_by == root
    assert result.err == (
        "WARNING: sales_report v1 activated by superuser root WITHOUT review or a validation "
        f"run (recorded as approval {approval.pk}, kind import_superuser)\n"
    )
    assert "without review or a validation run" in caplog.text
    assert again.lines == ["unchanged sales_report v1 (active)"]
    assert again.err == ""  # nothing new activated, nothing recorded
    assert Approval.objects.count() == 1
    assert approval_tally(version=version).count == 0  # never counts towards a policy


def test_activating_a_stored_draft_says_activated_not_unchanged(cli, caplog):
    UserFactory(username="root", superuser=True)
    assert cli("importflow", SALES).lines == ["stored sales_report v1 (draft)"]

    with caplog.at_level("WARNING"):
        result = cli("importflow", SALES, "--activate", "--as", "root")

    assert result.code == 0, result.err
    assert result.lines == [
        "activated sales_report v1 (active: activated by import, no validation run)"
    ]
    assert result.err.count("WITHOUT review") == 1
    assert "without review" not in caplog.text  # no second copy of the warning on stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "name the superuser responsible with --as USERNAME"),
        (("--as", "staffer"), "--as staffer: no active superuser of that name"),
        (("--as", "ghost"), "--as ghost: no active superuser of that name"),
        (("--as", "retired"), "--as retired: no active superuser of that name"),
    ],
)
def test_activate_without_a_superuser_is_refused_and_stores_nothing(cli, args, message):
    UserFactory(username="staffer")
    UserFactory(username="retired", superuser=True, is_active=False)

    result = cli("importflow", SALES, "--activate", *args)

    assert result.code == 1
    assert message in result.err
    assert not Workflow.objects.exists()
    assert not Approval.objects.exists()


def test_the_service_refuses_a_non_superuser_and_leaves_an_active_version_alone():
    version = pending_version()
    staffer = UserFactory(username="staffer")

    with pytest.raises(ApprovalForbidden, match="not a superuser"):
        workflow_activate_imported(version=version, superuser=staffer)
    Workflow.objects.filter(pk=version.pk).update(status="active")
    root = UserFactory(username="root", superuser=True)

    assert workflow_activate_imported(version=Workflow.objects.get(), superuser=root) is None
    assert not Approval.objects.exists()
