"""Runs to read: one that failed after a retry, one that succeeded (the run page, showrun).

``failed_flow``: ``repo`` (github_repo) succeeds on its second try after a 503,
``langs`` (github_languages) fails with a fatal 404, ``issues`` (github_issues) runs
beside them and succeeds, and ``summary`` (a transform reading ``langs``) never runs.
The tools are the shipped ones (``example_tools``), the API the loopback fake
(``fake_api``). ``GITHUB_TOKEN`` holds a secret, so every page and line can be
checked for it.
"""

from __future__ import annotations

from runs.models import Run, RunTrigger
from runs.services import run_create, run_execute
from workflows.services import workflow_import

FAST_RETRY = {"max_attempts": 3, "initial_delay": 0.2, "max_delay": 0.3, "jitter": 0}
SECRET_TOKEN = "ghp_runpage_secret_0123456789abcdef"
REPO = {"owner": "$input.owner", "repo": "$input.repo"}


def failed_flow() -> dict:
    return {
        "name": "repo_report",
        "inputs": {"owner": {"type": "string"}, "repo": {"type": "string"}},
        "steps": [
            {
                "id": "repo",
                "kind": "tool",
                "tool": "github_repo",
                "input_mapping": REPO,
                "retry": FAST_RETRY,
            },
            {"id": "issues", "kind": "tool", "tool": "github_issues", "input_mapping": REPO},
            {
                "id": "langs",
                "kind": "tool",
                "tool": "github_languages",
                "input_mapping": REPO,
            },
            {
                "id": "summary",
                "kind": "transform",
                "input_mapping": {"langs": "$step.langs", "issues": "$step.issues"},
                "expression": "{langs: langs, open: length(issues)}",
            },
        ],
        "edges": [{"from": "repo", "to": "langs"}],
        "outputs": {"open": "summary.open", "stars": "repo.stars"},
    }


def make_failed_run(fake_api, monkeypatch) -> Run:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET_TOKEN)
    fake_api.fail("github_repo", status=503, times=1, body={"message": "Service Unavailable"})
    fake_api.fail("github_languages", status=404, body={"message": "Not Found"})
    workflow, _ = workflow_import(data=failed_flow())
    run = run_create(
        workflow=workflow, trigger=RunTrigger.CLI, inputs={"owner": "octo-org", "repo": "widgets"}
    )
    return run_execute(run=run)


def make_succeeded_run(fake_api, monkeypatch) -> Run:
    monkeypatch.setenv("GITHUB_TOKEN", SECRET_TOKEN)
    fake_api.heal()
    data = failed_flow()
    data["name"] = "repo_report_ok"
    workflow, _ = workflow_import(data=data)
    run = run_create(
        workflow=workflow, trigger=RunTrigger.API, inputs={"owner": "octo-org", "repo": "widgets"}
    )
    return run_execute(run=run)
