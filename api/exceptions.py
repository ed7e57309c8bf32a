"""The API's own refusal, importable before DRF's views (the parser raises it)."""

from collections.abc import Iterable
from typing import Any

from rest_framework import exceptions


class ApiError(exceptions.APIException):
    """An API-level refusal with a stable code and optional details (webhooks, waits)."""

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status_code: int,
        details: Iterable[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message, code)
        self.status_code = status_code
        self.error_code = code
        self.details = list(details or [])
