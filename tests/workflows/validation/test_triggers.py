"""workflows.validation.triggers: a trigger is checked before any event comes (the golden
files under tests/data/flows/invalid/trigger_*.yaml show each code)."""

from __future__ import annotations

from workflows.validator import validate_workflow

FLOW = {
    "name": "digest",
    "inputs": {"rows": {"type": "integer"}, "note": {"type": "string", "default": ""}},
    "steps": [
        {
            "id": "echo",
            "kind": "transform",
            "expression": "[rows, note]",
            "input_mapping": {"rows": "$input.rows", "note": "$input.note"},
        }
    ],
}


class Stored:
    """The stored workflows the validator may be given (their active versions' names)."""

    def __init__(self, *names: str) -> None:
        self.names = set(names)

    def get(self, name: str):
        return object() if name in self.names else None


def issues(triggers: list, workflows=None) -> list[tuple[str, str, str]]:
    report = validate_workflow({**FLOW, "triggers": triggers}, registry=None, workflows=workflows)
    return [(i.code, i.path, i.severity) for i in report.issues]


def test_a_well_formed_trigger_passes_and_literals_objects_and_lists_are_walked():
    trigger = {
        "on_workflow": {"name": "export", "status": ["succeeded", "failed"]},
        "inputs": {
            "rows": "$event.outputs.rows.0",
            "note": {"$literal": "$5 off"},
        },
    }
    assert issues([trigger], Stored("export")) == []
    walked = {**trigger, "inputs": {"rows": 1, "note": ["$event.status", {"a": "$event.run_id"}]}}
    assert issues([walked]) == []


def test_each_problem_is_named_where_it_is():
    found = issues(
        [
            {"on_workflow": {"name": "digest"}, "inputs": {"rows": 1}},
            {"on_workflow": {"name": "export"}, "inputs": {"rowz": 1, "note": "$event.nothing"}},
            {"on_workflow": {"name": "ghost"}, "inputs": {"rows": "$event.status.deep"}},
        ],
        Stored("export"),
    )
    assert sorted(found) == sorted(
        [
            ("trigger_on_itself", "triggers[0].on_workflow.name", "error"),
            ("trigger_input_unknown", "triggers[1].inputs.rowz", "error"),
            ("trigger_reference_invalid", "triggers[1].inputs.note", "error"),
            ("trigger_input_missing", "triggers[1].inputs", "error"),
            ("trigger_workflow_unknown", "triggers[2].on_workflow.name", "warning"),
            ("trigger_reference_invalid", "triggers[2].inputs.rows", "error"),
        ]
    )


def test_a_workflow_waited_for_is_looked_up_only_when_the_stored_ones_are_given():
    assert issues([{"on_workflow": {"name": "ghost"}, "inputs": {"rows": 1}}]) == []


def test_a_trigger_without_a_known_event_kind_or_status_is_a_schema_error():
    assert {c for c, _, _ in issues([{"on_poll": {}}])} == {"schema_invalid"}
    bad_status = [{"on_workflow": {"name": "x", "status": "cancelled"}, "inputs": {"rows": 1}}]
    assert {c for c, _, _ in issues(bad_status)} == {"schema_invalid"}
