"""One error shape for every API answer: ``{code, message, details}``.

``code`` is stable: the app's own ``FlowpilotError.code`` for business errors, DRF's
error codes (``not_authenticated``, ``permission_denied``, ``not_found``,
``throttled``, ``invalid``…) for the rest. ``details`` is a list of
``{path, code, message}`` — each problem with its JSON path (``steps[2].tool``,
``inputs.top``) — or an empty list. The handler keeps DRF's ``set_rollback()``, so
a failed request leaves no half-written rows in an atomic block.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import set_rollback

from api.exceptions import ApiError
from runs.approvals import ApprovalDecided, ApprovalNotReady, ApprovalRefused
from runs.idempotency import IdempotencyKeyInvalid, IdempotencyKeyReused
from runs.restart import (
    RestartNeedsConfirmation,
    RestartStepUnknown,
    RestartUnfit,
    RestartVersionRefused,
)
from runs.services import RunStateError
from schedules.services import ScheduleInvalid
from tools.errors import FlowpilotError
from tools.llm import LLMNotConfigured
from tools.permissions import PermissionRefused
from workflows.errors import WorkflowNotActive, WorkflowNotFound, WorkflowTransitionError
from workflows.inputs import InputsInvalid
from workflows.planner import PlanNotRevisable, PlanRoundsExhausted
from workflows.revisions import (
    ApprovalForbidden,
    ApprovalStateError,
    DefinitionInvalid,
    DefinitionUnchanged,
)
from workflows.validation.report import ValidationIssue, WorkflowInvalid, format_path

# The status of each business error; the first class an error is an instance of wins.
# Everything else of the app's errors is a 400 (the request asked for something wrong).
STATUS_BY_ERROR: tuple[tuple[type[FlowpilotError], int], ...] = (
    (WorkflowNotActive, status.HTTP_409_CONFLICT),
    (WorkflowNotFound, status.HTTP_404_NOT_FOUND),
    (ApprovalForbidden, status.HTTP_403_FORBIDDEN),
    (PermissionRefused, status.HTTP_403_FORBIDDEN),
    (ApprovalRefused, status.HTTP_403_FORBIDDEN),
    (ApprovalDecided, status.HTTP_409_CONFLICT),
    (ApprovalNotReady, status.HTTP_409_CONFLICT),
    (ApprovalStateError, status.HTTP_409_CONFLICT),
    (DefinitionUnchanged, status.HTTP_409_CONFLICT),
    (WorkflowTransitionError, status.HTTP_409_CONFLICT),
    (RunStateError, status.HTTP_409_CONFLICT),
    (RestartNeedsConfirmation, status.HTTP_409_CONFLICT),
    (RestartVersionRefused, status.HTTP_409_CONFLICT),
    (RestartUnfit, status.HTTP_409_CONFLICT),
    (PlanNotRevisable, status.HTTP_409_CONFLICT),
    (PlanRoundsExhausted, status.HTTP_409_CONFLICT),
    (IdempotencyKeyReused, status.HTTP_422_UNPROCESSABLE_ENTITY),
    (IdempotencyKeyInvalid, status.HTTP_400_BAD_REQUEST),
    (LLMNotConfigured, status.HTTP_503_SERVICE_UNAVAILABLE),  # the planner is off
)


def error_body(code: str, message: str, details: list[dict] | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "details": list(details or [])}


def error_details(exc: FlowpilotError) -> list[dict[str, str]]:
    """Each problem a business error carries, with its JSON path."""
    issues: Sequence[ValidationIssue]
    if isinstance(exc, WorkflowInvalid):
        issues = exc.report.errors
    elif isinstance(exc, DefinitionInvalid):
        issues = exc.issues
    elif isinstance(exc, InputsInvalid):
        return [
            {
                "path": format_path([name], "inputs") if name else "inputs",
                "code": exc.code,
                "message": problem,
            }
            for name, problem in zip(exc.fields, exc.problems, strict=True)
        ]
    elif isinstance(exc, RestartNeedsConfirmation):
        return [
            {"path": "confirm", "code": exc.code, "message": f"step `{step}` is not idempotent"}
            for step in exc.steps
        ]
    elif isinstance(exc, RestartStepUnknown):
        return [{"path": "from_step", "code": exc.code, "message": exc.message}]
    elif isinstance(exc, RestartVersionRefused):
        return [{"path": "version", "code": exc.code, "message": exc.message}]
    elif isinstance(exc, RestartUnfit):
        return [{"path": "", "code": exc.code, "message": problem} for problem in exc.problems]
    elif isinstance(exc, WorkflowNotActive):
        message = f"v{exc.version} is {exc.status}, not active"
        return [{"path": "version", "code": exc.code, "message": message, "status": exc.status}]
    else:
        return []
    return [{"path": i.path, "code": i.code, "message": i.message} for i in issues]


def schedule_invalid_error(exc: ScheduleInvalid) -> ApiError:
    """A 400 whose detail's path is the field the message names (its first `field`)."""
    named = re.search(r"`(\w+)`", str(exc))
    detail = {"path": named.group(1) if named else "", "code": "invalid", "message": str(exc)}
    return ApiError(str(exc), code="schedule_invalid", status_code=400, details=[detail])


def flowpilot_status(exc: FlowpilotError) -> int:
    declared = getattr(exc, "http_status", None)  # the API's own errors say it themselves
    if isinstance(declared, int) and declared:
        return declared
    for cls, code in STATUS_BY_ERROR:
        if isinstance(exc, cls):
            return code
    return status.HTTP_400_BAD_REQUEST


def validation_details(detail: Any, path: tuple = ()) -> list[dict[str, str]]:
    """DRF's nested error detail flattened to ``{path, code, message}`` rows."""
    if isinstance(detail, dict):
        rows = []
        for key in sorted(detail, key=str):
            sub = () if key == "non_field_errors" else (str(key),)
            rows += validation_details(detail[key], path + sub)
        return rows
    if isinstance(detail, list):
        rows = []
        for index, item in enumerate(detail):
            nested = isinstance(item, dict | list)
            rows += validation_details(item, path + ((index,) if nested else ()))
        return rows
    code = getattr(detail, "code", None) or "invalid"
    return [{"path": format_path(path), "code": code, "message": str(detail)}]


def api_exception_handler(exc: Exception, context: dict) -> Response | None:
    """DRF's ``EXCEPTION_HANDLER``: every refusal in the one shape; ``None`` → a 500."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, ScheduleInvalid):  # a ValueError of its own: the field it names
        exc = schedule_invalid_error(exc)
    if isinstance(exc, FlowpilotError):
        body = error_body(exc.code, exc.message, error_details(exc))
        set_rollback()
        return Response(body, status=flowpilot_status(exc))
    if not isinstance(exc, exceptions.APIException):
        return None
    headers = {}
    if getattr(exc, "auth_header", None):
        headers["WWW-Authenticate"] = exc.auth_header
    if getattr(exc, "wait", None):
        headers["Retry-After"] = str(int(exc.wait))
    set_rollback()
    return Response(_api_body(exc), status=exc.status_code, headers=headers)


def _api_body(exc: exceptions.APIException) -> dict[str, Any]:
    if isinstance(exc, ApiError):
        return error_body(exc.error_code, str(exc.detail), exc.details)
    if isinstance(exc, exceptions.ValidationError):
        details = validation_details(exc.detail)
        first = details[0] if details else {"path": "", "message": "invalid request"}
        where = f"{first['path']}: " if first["path"] else ""
        return error_body("invalid", f"{where}{first['message']}", details)
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else exc.default_code
    return error_body(code, str(exc.detail))
