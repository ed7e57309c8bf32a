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
