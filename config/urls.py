from django.contrib import admin
from django.urls import include, path

from health.views import health_details, healthz

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("healthz/details/", health_details, name="health-details"),
    path("admin/", admin.site.urls),
    path("api/v1/", include("api.urls")),
]

handler404 = "api.handlers.not_found"
