"""Flows and the loopback server of the `loop` step tests (in process and on Celery).

A review-and-fix cycle: ``fixup`` (the child) appends the previous review's feedback to
its draft (``fix``) and sends the text to the ``check`` tool, a loopback reviewer that
passes a text with two ``!`` and otherwise asks for one more. ``polish`` (the parent)
loops ``fixup`` until the check passes: starting from ``"hi"``, the check fails on
``"hi"`` and ``"hi!"`` and passes on the third iteration, ``"hi!!"``.
"""

from __future__ import annotations

import json
from typing import Any

from tests.celery_support import FAST_RETRY
from tests.fakes import FakeAPI, FakeResponse

CHECK_TOOL = """
- name: check
  kind: http
  description: Review a text; it passes with two exclamation marks (loopback fake).
  base_url: "{base}"
  request: {{method: POST, url: /check, body: {{text: "{{{{text}}}}"}}}}
  inputs: {{type: object, properties: {{text: {{type: string}}}}, required: [text]}}
  idempotent: true
  timeout: 30
  retry: {retry}
"""


def reviewer(request: Any, match: Any) -> FakeResponse:
    """The reviewer: ``{"passed", "feedback", "text"}`` for the text sent."""
    text = request.json()["text"]
    passed = text.count("!") >= 2
    return FakeResponse.json({"passed": passed, "feedback": "" if passed else "!", "text": text})


def install_check(fake: FakeAPI) -> None:
    """``POST /check`` answers as ``reviewer`` does."""
    fake.route("check", "POST", r"/check", reviewer)


def load_check_tool(fake: FakeAPI) -> None:
    """Store the ``check`` tool (needs a django_db mark)."""
    from tools.loader import load_tool_text
    from tools.services import tool_upsert

    text = CHECK_TOOL.format(base=fake.url, retry=json.dumps(FAST_RETRY))
    for spec in load_tool_text(text, source="tests/runs/loops.py"):
        tool_upsert(spec=spec, source="tests/runs/loops.py")


def checks(fake: FakeAPI) -> list[str]:
    """The texts the reviewer was sent, in order."""
    return [request.json()["text"] for request in fake.requests("check")]


def fixup_flow() -> dict:
    return {
        "name": "fixup",
        "inputs": {"draft": {"type": "string"}, "feedback": {"type": "string", "default": ""}},
        "steps": [
            {
                "id": "fix",
                "kind": "transform",
                "expression": "{text: join('', [draft, feedback])}",
                "input_mapping": {"draft": "$input.draft", "feedback": "$input.feedback"},
            },
            {"id": "check", "kind": "tool", "tool": "check", "input_mapping": {"text": "fix.text"}},
        ],
        "outputs": {"text": "fix.text", "passed": "check.passed", "feedback": "check.feedback"},
    }


def polish_flow(**loop: Any) -> dict:
    return {
        "name": "polish",
        "inputs": {"draft": {"type": "string"}},
        "steps": [
            {
                "id": "review",
                "kind": "loop",
                "workflow": "fixup",
                "max_iterations": 5,
                "until": "output.passed == true",
                "input_mapping": {"draft": "$input.draft"},
                "iteration_mapping": {
                    "draft": "$loop.previous.text",
                    "feedback": "$loop.previous.feedback",
                },
                **loop,
            },
            {
                "id": "publish",
                "kind": "transform",
                "expression": "{final: text, rounds: rounds}",
                "input_mapping": {"text": "review.last.text", "rounds": "review.count"},
            },
        ],
        "outputs": {
            "final": "publish.final",
            "rounds": "publish.rounds",
            "held": "review.condition_held",
        },
    }
