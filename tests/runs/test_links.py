"""runs.links: a run page's links — its version and the runs of that version, then every
provider the setting names, in order (upper layers add links without an upward import)."""

from __future__ import annotations

import pytest

from runs.links import RunLink, run_links
from tests.factories import RunFactory

pytestmark = pytest.mark.django_db


def extra(*, run) -> list[RunLink]:
    return [RunLink("extra", f"/x/{run.pk}", "from a provider")]


def test_the_version_then_the_providers_links(settings):
    settings.FLOWPILOT_RUN_LINK_PROVIDERS = [f"{__name__}.extra"]
    run = RunFactory()

    links = run_links(run=run)

    workflow = run.workflow
    assert [link.label for link in links] == ["version", "runs of this version", "extra"]
    assert links[0].text == f"{workflow.name} v{workflow.version} ({workflow.status})"
    assert links[1].url.endswith(f"?workflow__id__exact={workflow.pk}")
    assert links[2] == RunLink("extra", f"/x/{run.pk}", "from a provider")


def test_no_provider_means_only_the_version_links(settings):
    settings.FLOWPILOT_RUN_LINK_PROVIDERS = []
    assert len(run_links(run=RunFactory())) == 2
