"""Django's 404 page for ``/api/`` paths that match no route: the API's error shape."""

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views import defaults

from api.errors import error_body


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler404``: JSON under ``/api/``, Django's page elsewhere (the admin)."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("not_found", "No such resource."), status=404)
    return defaults.page_not_found(request, exception)
