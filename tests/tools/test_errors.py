"""tools.errors: the fields a tool error declares, and how they are set.

Callers used to set ``not_sent``, ``not_processed``, ``request``, ``elapsed`` and
``problems`` on exception objects from outside; the classes now declare them, so an
error that never went through those callers still answers them.
"""

from tools.errors import (
    ToolConfigError,
    ToolError,
    ToolHTTPError,
    ToolOutcomeUnknown,
    ToolRateLimited,
    ToolTimeout,
    ToolUnreachable,
)


def test_a_tool_error_answers_its_fields_when_nobody_set_them():
    error = ToolTimeout("GET https://example.test: no answer within 1s")
    assert (error.not_sent, error.not_processed, error.request, error.elapsed) == (
        False,
        False,
        None,
        None,
    )


def test_the_constructor_sets_the_fields():
    request = {"method": "GET", "url": "https://example.test/x", "status": None}
    error = ToolUnreachable("refused", not_sent=True, request=request, elapsed=0.25)
    assert error.not_sent is True
    assert error.request == request
    assert error.elapsed == 0.25
    assert error.retryable is True  # the class's retryability is kept


def test_a_429_says_it_was_not_processed_and_other_statuses_only_when_told():
    assert ToolRateLimited("busy", retry_after=2.0).not_processed is True
    assert ToolHTTPError("down", status=503).not_processed is False
    assert ToolHTTPError("down", status=503, not_processed=True).not_processed is True


def test_attach_request_keeps_the_inner_layers_request_unless_told_to_replace_it():
    error = ToolError("failed")
    inner = {"url": "https://example.test/final", "status": 500}
    error.attach_request(inner)
    error.attach_request({"url": "https://example.test/first", "status": None}, replace=False)
    assert error.request == inner
    outer = {"url": "https://example.test/again", "status": 502}
    error.attach_request(outer)
    assert error.request == outer


def test_mark_not_sent():
    error = ToolTimeout("token endpoint: no answer")
    error.mark_not_sent()
    assert error.not_sent is True


def test_an_outcome_unknown_keeps_the_request_of_the_error_it_replaces():
    request = {"method": "POST", "url": "https://example.test/orders", "status": 502}
    unknown = ToolOutcomeUnknown("may have acted", request=request)
    assert unknown.request == request
    assert unknown.retryable is False


def test_a_config_error_lists_its_problems():
    problems = ["tools.yaml:3: tool 'a': field name: bad", "tools.yaml:9: field kind: bad"]
    error = ToolConfigError.of(problems)
    assert error.problems == problems
    assert error.message == "\n".join(problems)
    assert ToolConfigError("one problem").problems == ["one problem"]
