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


POLL = {
    "poll": {
        "tool": "list_orders",
        "every": "5m",
        "args": {"since": "$cursor", "filter": {"status": "open", "after": "$cursor.at"}},
        "items": "data",
        "dedup_key": "id",
        "cursor": {"initial": "1970-01-01", "next": "$max.updated_at"},
    },
    "inputs": {"rows": "$item.lines.0.qty", "note": ["$item", {"$literal": "$item"}]},
}


def test_a_well_formed_poll_passes_and_its_interval_reads_as_seconds():
    assert issues([POLL]) == []
    report = validate_workflow({**FLOW, "triggers": [POLL]}, registry=None)
    assert report.spec.triggers[0].poll.every == 300
    assert report.spec.allowed_tools() == ["list_orders"]  # the tool it polls is pinned too


def test_a_poll_reads_only_the_item_and_its_arguments_only_the_cursor():
    poll = {
        "poll": {**POLL["poll"], "args": {"since": "$item.at"}},
        "inputs": {"rows": "$event.outputs.rows", "note": "$cursor"},
    }
    assert sorted(issues([poll])) == [
        ("trigger_reference_invalid", "triggers[0].inputs.note", "error"),
        ("trigger_reference_invalid", "triggers[0].inputs.rows", "error"),
        ("trigger_reference_invalid", "triggers[0].poll.args.since", "error"),
    ]


def test_a_poll_that_reads_a_cursor_it_does_not_declare_is_refused():
    poll = {"poll": {**POLL["poll"], "cursor": None}, "inputs": {"rows": 1}}
    assert issues([poll]) == [("trigger_cursor_undeclared", "triggers[0].poll.args", "error")]
    unread = {"poll": {**POLL["poll"], "args": {}}, "inputs": {"rows": 1}}
    assert issues([unread]) == []  # a cursor nothing sends is allowed: each poll reads one page


def test_a_listed_allowlist_must_name_the_polled_tool():
    flow = {**FLOW, "tools": ["other"], "triggers": [POLL]}
    report = validate_workflow(flow, registry=None)
    assert [(i.code, i.path) for i in report.issues] == [
        ("trigger_tool_not_allowed", "triggers[0].poll.tool")
    ]


def test_a_missing_required_input_names_the_item_as_the_example():
    [issue] = validate_workflow(
        {**FLOW, "triggers": [{"poll": POLL["poll"], "inputs": {}}]}, registry=None
    ).issues
    assert issue.code == "trigger_input_missing"
    assert "`rows: $item.rows`" in issue.message


def bad_poll(**changes) -> set[str]:
    return {c for c, _, _ in issues([{"poll": {**POLL["poll"], **changes}, "inputs": {"rows": 1}}])}


def test_a_malformed_poll_is_a_schema_error():
    assert bad_poll(every="5 minutes") == {"schema_invalid"}
    assert bad_poll(every=5) == {"schema_invalid"}  # more often than every 10 s
    assert bad_poll(every="9d") == {"schema_invalid"}  # less than once a week
    assert bad_poll(dedup_key="a..b") == {"schema_invalid"}
    assert bad_poll(items="data.") == {"schema_invalid"}
    assert bad_poll(cursor={"next": "$first.at"}) == {"schema_invalid"}
    assert bad_poll(cursor={"next": "$last"}) == {"schema_invalid"}
    assert bad_poll(tool="not a name") == {"schema_invalid"}
    both = [{"poll": POLL["poll"], "on_workflow": {"name": "x"}, "inputs": {"rows": 1}}]
    assert {c for c, _, _ in issues(both)} == {"schema_invalid"}
    assert {c for c, _, _ in issues([{"inputs": {"rows": 1}}])} == {"schema_invalid"}
