"""The run admin shows a run with its per-step results, read-only, secrets absent."""

import pytest

from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def staff_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("admin", "admin@example.com", "pw-admin-1")
    client.force_login(user)
    return client


def test_offline_run_shows_in_admin_with_per_step_results(cli, output_dir, staff_client):
    result = cli("runflow", "examples/sales_report.yaml")
    assert result.code == 0, result.out + result.err
    run = Run.objects.get()

    listing = staff_client.get("/admin/runs/run/")
    assert listing.status_code == 200
    assert f"sales_report v{run.workflow.version}" in listing.content.decode()

    page = staff_client.get(f"/admin/runs/run/{run.pk}/change/")
    assert page.status_code == 200
    html = page.content.decode()
    for step_id in ("load", "by_region", "top_products", "report"):
        assert step_id in html
    assert 'id="fp-run-status" data-status="succeeded"' in html
    assert html.count('class="fp-step fp-step-card-succeeded"') == 4  # its four steps
    assert "total_revenue" in html  # run outputs are shown
    assert 'name="_save"' not in html  # history is read-only


def test_run_admin_escapes_hostile_values(cli, output_dir, staff_client, tmp_path):
    flow = tmp_path / "hostile.yaml"
    flow.write_text(
        "name: hostile\n"
        "inputs: {title: {type: string}}\n"
        "steps:\n"
        "  - {id: load, kind: tool, tool: csv_read, input_mapping: {path: data/sales.csv}}\n"
        "  - id: report\n"
        "    kind: tool\n"
        "    tool: write_report\n"
        "    input_mapping: {path: h.html, title: $input.title, sections: []}\n"
        "    on_error: continue\n",
        encoding="utf-8",
    )
    result = cli("runflow", str(flow), "--input", "title=<script>alert(1)</script>")
    assert result.code == 0, result.out + result.err
    run = Run.objects.get()
    html = staff_client.get(f"/admin/runs/run/{run.pk}/change/").content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# --- the run page's buttons: what applies, to whom ------------------------------------


def _viewer(django_user_model):
    """Staff with `runs.view_run` only: reads runs, may not operate them."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("viewer", password="pw-view-1", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_run"))
    return user


def test_the_run_page_offers_the_operations_that_apply(staff_client):
    from runs.models import RunStatus
    from tests.factories import RunFactory

    failed = RunFactory(status=RunStatus.FAILED, error_summary="step `load` failed")
    running = RunFactory(status=RunStatus.RUNNING)

    page = staff_client.get(f"/admin/runs/run/{failed.pk}/change/").content.decode()
    assert 'id="fp-resume"' in page
    assert 'id="fp-again"' in page
    assert 'id="fp-restart-link"' in page
    assert 'id="fp-cancel"' not in page
    assert f"<h1>Run {failed.pk} of sales_report v1</h1>" in page
    assert f"<h2>{failed}</h2>" not in page  # the title once: no subtitle repeating it

    page = staff_client.get(f"/admin/runs/run/{running.pk}/change/").content.decode()
    assert 'id="fp-cancel"' in page
    assert 'id="fp-resume"' not in page
    assert 'id="fp-again"' not in page

    url = f"/admin/runs/run/{running.pk}/do/cancel/"
    assert staff_client.get(url).status_code == 405  # an operation is a POST
    response = staff_client.post(url, follow=True)
    assert f"Run {running.pk} cancelled" in response.content.decode()
    running.refresh_from_db()
    assert running.status == RunStatus.CANCELLED
    again = staff_client.post(url, follow=True).content.decode()
    # refused, said on the page (the admin capitalises its messages)
    assert f"Run {running.pk} is cancelled; only queued, pending or running runs cancel" in again


def test_without_the_operate_permission_no_button_and_a_forged_post_is_refused(
    client, django_user_model
):
    from runs.models import RunStatus
    from tests.factories import RunFactory

    running = RunFactory(status=RunStatus.RUNNING)
    client.force_login(_viewer(django_user_model))

    page = client.get(f"/admin/runs/run/{running.pk}/change/").content.decode()
    assert 'id="fp-run-buttons"' not in page
    response = client.post(f"/admin/runs/run/{running.pk}/do/cancel/", follow=True)
    assert "needs the `runs.operate_run` permission" in response.content.decode()
    running.refresh_from_db()
    assert running.status == RunStatus.RUNNING
    unknown = client.post(f"/admin/runs/run/{running.pk}/do/explode/")
    assert unknown.status_code == 404


def test_the_runs_list_shows_the_failing_step_and_filters_failed_today(staff_client):
    from datetime import timedelta

    from django.utils import timezone

    from runs.models import RunStatus
    from tests.factories import RunFactory, StepResultFactory

    today = RunFactory(status=RunStatus.FAILED, error_summary="step `fetch_sales` failed (http)")
    StepResultFactory(run=today, step_id="fetch_sales", status="failed")
    old = RunFactory(status=RunStatus.FAILED, error_summary="old failure")
    Run.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    RunFactory(status=RunStatus.SUCCEEDED)

    listing = staff_client.get("/admin/runs/run/").content.decode()
    assert "<code>fetch_sales</code>" in listing
    assert "step `fetch_sales` failed (http)" in listing

    recent = staff_client.get("/admin/runs/run/?failed_since=24h").content.decode()
    assert "step `fetch_sales` failed (http)" in recent
    assert "old failure" not in recent
    assert "1 run" in recent


def test_a_run_started_from_the_admin_records_who_started_it(staff_client, output_dir):
    from runs.models import RunStatus
    from tests.factories import RunFactory

    failed = RunFactory(status=RunStatus.FAILED, error_summary="step `load` failed")
    response = staff_client.post(f"/admin/runs/run/{failed.pk}/do/again/", follow=True)
    assert response.status_code == 200

    again = Run.objects.exclude(pk=failed.pk).get()
    assert again.started_by is not None
    assert again.started_by.is_staff
    name = again.started_by.get_username()
    assert failed.started_by is None  # recorded directly, as a command-line run is

    listing = staff_client.get("/admin/runs/run/").content.decode()
    assert f"Manual (admin) · by {name}</td>" in listing
    page = staff_client.get(f"/admin/runs/run/{again.pk}/change/").content.decode()
    assert f'<span id="fp-started-by">{name}</span>' in page
