"""The OpenAPI schema's error responses: every operation documents every refusal.

Each view declares its success answers; the refusals are the same everywhere (the
one error shape of ``api.errors``), so this drf-spectacular post-processing hook
adds them to every operation instead of each view repeating them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from drf_spectacular.generators import SchemaGenerator
    from rest_framework.request import Request


ERRORS = {
    "400": "The request is invalid; `details` lists each problem with its JSON path.",
    "401": "No or invalid credentials (webhooks: timestamp or signature).",
    "403": "Authenticated, but without the permission this action needs.",
    "404": "No such object.",
    "405": "The method is not allowed here.",
    "406": "The Accept header asks for a format the API does not give.",
    "409": "The object is not in a state this action applies to, or a replayed webhook.",
    "415": "The body's media type is not accepted.",
    "422": "The Idempotency-Key was used for another request.",
    "429": "Too many requests; `Retry-After` says when to try again.",
}

# Refusals only some operations give, by path and method.
OPERATION_ERRORS = {
    ("/api/v1/plans/", "post"): {
        "503": "No LLM is configured for the planner (`llm_not_configured`): the message "
        "says what to set; nothing was stored or sent.",
    },
    **{
        (f"/api/v1/credentials/{tail}", method): {
            "503": "No credential key is configured, or no key decrypts the stored values "
            "(`credential_key_error`): the message says what to set; nothing was stored.",
        }
        for tail, method in (
            ("", "post"),
            ("{name}/", "patch"),
            ("{name}/connect/", "post"),
            ("{name}/disconnect/", "post"),
        )
    },
}


def add_error_responses(
    result: dict[str, Any], generator: SchemaGenerator, request: Request | None, public: bool
) -> dict[str, Any]:
    """drf-spectacular ``POSTPROCESSING_HOOKS`` entry: the Error schema on every operation."""
    ref = {"$ref": "#/components/schemas/Error"}
    result.setdefault("components", {}).setdefault("schemas", {})["Error"] = _error_schema()
    for path, operations in result.get("paths", {}).items():
        for method, operation in operations.items():
            responses = operation.setdefault("responses", {})
            own = OPERATION_ERRORS.get((path, method), {})
            for code, description in {**ERRORS, **own}.items():
                responses.setdefault(
                    code,
                    {"description": description, "content": {"application/json": {"schema": ref}}},
                )
    return result


def _error_schema() -> dict:
    detail = {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "code": {"type": "string"},
            "message": {"type": "string"},
            "status": {
                "type": "string",
                "description": "`workflow_not_active`: the state of the version named.",
            },
        },
        "required": ["path", "code", "message"],
    }
    return {
        "type": "object",
        "description": "Every error: a stable code, a sentence, and each problem with its path.",
        "properties": {
            "code": {"type": "string"},
            "message": {"type": "string"},
            "details": {"type": "array", "items": detail},
        },
        "required": ["code", "message", "details"],
    }
