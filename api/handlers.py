"""Django's own error pages for ``/api/`` paths: the API's error shape.

Most refusals reach DRF's exception handler (``api.errors``); these are the ones that
happen around it — no route matched (404), a body past ``DATA_UPLOAD_MAX_MEMORY_SIZE``
(Django's ``RequestDataTooBig``: a 413 here), another ``SuspiciousOperation`` (400),
a ``PermissionDenied`` outside DRF (403), a CSRF failure of Django's middleware (403)
and an unexpected error (500). Under ``/api/`` each is ``{code, message, details}``
JSON; elsewhere (the admin) Django's page.
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import csrf, defaults

from api.errors import error_body

API_PREFIX = "/api/"


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIX)


def too_large_message() -> str:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    return f"the body is larger than DATA_UPLOAD_MAX_MEMORY_SIZE ({limit} bytes)"


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: JSON under ``/api/``, Django's page elsewhere (the admin)."""
    if _is_api(request):
        return JsonResponse(error_body("not_found", "No such resource."), status=404)
    return defaults.page_not_found(request, exception)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400``: a body over the upload limit is a 413, any other a 400."""
    if not _is_api(request):
        return defaults.bad_request(request, exception)
    if isinstance(exception, RequestDataTooBig):
        return JsonResponse(error_body("request_too_large", too_large_message()), status=413)
    return JsonResponse(error_body("bad_request", "The request was refused."), status=400)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler403``."""
    if not _is_api(request):
        return defaults.permission_denied(request, exception)
    message = "you do not have the permission this action needs"
    return JsonResponse(error_body("permission_denied", message), status=403)


def server_error(request: HttpRequest) -> HttpResponse:
    """``handler500``: what went wrong is in the server's log, not in the answer."""
    if not _is_api(request):
        return defaults.server_error(request)
    message = "The server failed to answer; the error is in its log."
    return JsonResponse(error_body("server_error", message), status=500)


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """``CSRF_FAILURE_VIEW``: a session-authenticated write without a valid CSRF token."""
    if not _is_api(request):
        return csrf.csrf_failure(request, reason)
    message = f"CSRF verification failed: {reason}" if reason else "CSRF verification failed"
    return JsonResponse(error_body("csrf_failed", message), status=403)
