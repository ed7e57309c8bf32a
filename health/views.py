"""``/healthz`` (anyone: status words only) and ``/healthz/details/`` (staff: reasons).

``/healthz`` answers 200 when every component is ok or not configured, else 503,
with ``{"status", "components": {name: status}}`` — no reason, URL, version or
host, so it is safe to leave unauthenticated for load balancers and compose. The
staff page shows each component's reason and details (HTML; ``?format=json`` for
JSON). Both run the checks of ``health.checks`` at each request.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.response import TemplateResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from health.checks import HealthReport, health_report


def _status(report: HealthReport) -> int:
    return 200 if report.ok else 503


@never_cache
@require_GET
def healthz(request: HttpRequest) -> HttpResponse:
    report = health_report()
    return JsonResponse(report.as_dict(details=False), status=_status(report))


@never_cache
@require_GET
@staff_member_required
def health_details(request: HttpRequest) -> HttpResponse:
    report = health_report()
    if request.GET.get("format") == "json":
        return JsonResponse(report.as_dict(), status=_status(report))
    context = {**admin.site.each_context(request), "report": report, "title": "Health"}
    return TemplateResponse(request, "health/health.html", context, status=_status(report))
