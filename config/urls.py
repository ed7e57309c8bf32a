from django.contrib import admin
from django.urls import include, path

from health.metrics import metrics
from health.views import health_details, healthz
from runs.approval_views import approval_link_view

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("healthz/details/", health_details, name="health-details"),
    path("metrics", metrics, name="metrics"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
    path("approvals/<str:token>/", approval_link_view, name="approval-link"),
]

handler400 = "api.handlers.bad_request"
handler403 = "api.handlers.permission_denied"
handler404 = "api.handlers.not_found"
handler500 = "api.handlers.server_error"
