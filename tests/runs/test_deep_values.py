"""A 600-deep valid value passes every walk over user data, or is refused naming the depth.

Named after the feature, not a module: templating, argument schemas, transforms, the
dot-path rule, the storage escape, the checkpoint size estimate and the admin's
pretty-printing each see the same deep value. (The redactor's walk has its own test.)
"""

from __future__ import annotations

import json

import pytest

from runs.engine.checkpoint import PREVIEW_BYTES
from tests.factories import RunFactory, StepResultFactory
from tools.jsondata import json_preview, json_snapshot, store_escape, store_unescape
from tools.paths import get
from tools.spec import json_schema_validator
from tools.templating import render, to_text
from workflows.transform import compile_transform

DEPTH = 600


def deep(depth: int = DEPTH) -> dict:
    value: dict = {"leaf": "\x00end"}
    for _ in range(depth):
        value = {"d": value}
    return value


def test_templating_interpolates_a_deep_value():
    rendered = render({"body": "{{x}}", "text": "v={{x}}"}, {"x": deep()}, env={})

    assert rendered["body"] == deep()
    assert rendered["text"] == "v=" + to_text(deep())


def test_an_argument_schema_checks_a_deep_value():
    validator = json_schema_validator(
        {"type": "object", "properties": {"x": {"type": "object"}}, "required": ["x"]}
    )

    assert list(validator.iter_errors({"x": deep()})) == []


def test_a_transform_reads_and_serialises_a_deep_value():
    result = compile_transform("{same: x, text: to_string(x)}").apply({"x": deep()})

    assert result["same"] == deep()
    assert json.loads(result["text"]) == deep()


def test_the_dot_path_rule_walks_600_levels():
    assert get(deep(), ("d",) * DEPTH) == {"leaf": "\x00end"}


def test_copies_escapes_and_the_size_estimate_handle_a_deep_value():
    value = deep()

    assert json_snapshot(value) == value
    assert store_unescape(store_escape(value)) == value
    assert len(json.dumps(store_escape(value)).encode()) > DEPTH * 5


@pytest.mark.django_db
def test_the_run_admin_shows_a_deep_stored_output_as_a_capped_preview(admin_client):
    run = RunFactory()
    stored = store_escape(deep())
    StepResultFactory(run=run, step_id="deep", output=stored, inputs={"x": stored})

    page = admin_client.get(f"/admin/runs/run/{run.pk}/change/")

    text = page.content.decode()
    assert page.status_code == 200
    assert text.count("characters shown]") == 2  # inputs and output, each cut
    assert len(text) < 100_000
    assert "␀0end" in json_preview(stored, indent=None)


@pytest.mark.django_db
def test_the_run_admin_never_renders_more_than_a_preview_of_a_big_record(admin_client):
    run = RunFactory()
    big = {"rows": ["x" * 1000] * 3000}  # 3 MB stored by hand, past any cap
    StepResultFactory(run=run, step_id="big", output=big, inputs=big, error={"message": big})

    page = admin_client.get(f"/admin/runs/run/{run.pk}/change/")

    assert page.status_code == 200
    assert len(page.content) < 200_000
    assert PREVIEW_BYTES < 20_000
