"""``$step.STEP_ID`` end to end: the whole output of a step reaches the step that maps it."""

from __future__ import annotations

import json

import pytest

from runs.models import Run
from tests.conftest import CONTROL_TOOLS_DIR, results_of, write_flow

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_whole_step_output_is_mapped_and_orders_the_steps(control_api, cli, tmp_path):
    flow = {
        "name": "whole_output",
        "inputs": {"service": {"type": "string"}},
        "steps": [
            {
                "id": "report",
                "kind": "transform",
                "input_mapping": {"status": "$step.check"},
                "expression": "{service: status.service, state: status.state}",
            },
            {
                "id": "check",
                "kind": "tool",
                "tool": "service_status",
                "input_mapping": {"service": "$input.service"},
            },
        ],
        "outputs": {"service": "report.service", "status": "$step.check"},
    }
    inputs = tmp_path / "inputs.json"
    inputs.write_text(json.dumps({"service": "db"}), encoding="utf-8")

    result = cli(
        "runflow", write_flow(tmp_path, flow), "--tools", str(CONTROL_TOOLS_DIR),
        "--inputs-file", str(inputs),
    )  # fmt: skip

    assert result.code == 0, result.out + result.err
    run = Run.objects.order_by("-pk").first()
    steps = results_of(run)
    whole = steps["check"].output
    assert whole["service"] == "db"
    assert steps["report"].inputs == {"status": whole}
    assert run.outputs == {"service": "db", "status": whole}
