"""The admin site, its modules loaded when the admin is first used, not at start-up.

Django's ``AdminConfig`` imports every app's ``admin`` module in ``django.setup()``,
and those import the services, the engine and their SDKs: every management command,
Celery worker and subprocess paid for pages it never shows. ``FlowpilotAdminConfig``
is ``SimpleAdminConfig`` (no discovery in ``ready()``) with a site that discovers the
admin modules the first time something asks it for its models: its URLs (the URL
conf, so every request and ``manage.py check``'s URL checks) or its system checks.

The site is branded "flowpilot"; its index is the flowpilot home (``health.home``):
failed runs, versions waiting for approval, next fires, open breakers and the
workers' and beat's health, above the app list. django-celery-beat's models are not
registered: beat still reads them, but flowpilot's Schedules are the one scheduler
people edit (overlap, catch-up, pause-after-failures and the fire log live there).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.contrib import admin
from django.contrib.admin.apps import SimpleAdminConfig
from django.core.checks import CheckMessage
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import URLPattern, URLResolver

HIDDEN_APPS = ("django_celery_beat",)  # beat's own tables: flowpilot's Schedules write them


class FlowpilotAdminSite(admin.AdminSite):
    """The default admin site; every app's ``admin`` module registered on first use."""

    site_header = "flowpilot"
    site_title = "flowpilot"
    index_title = "Home"
    index_template = "health/home.html"
    # The home lists every page; without the side list each page's columns fit 1400 px.
    enable_nav_sidebar = False

    def _discover(self) -> None:
        admin.autodiscover()
        for model in list(self._registry):
            if model._meta.app_label in HIDDEN_APPS:
                self.unregister(model)

    def check(self, app_configs: Sequence[AppConfig] | None) -> list[CheckMessage]:
        self._discover()
        return super().check(app_configs)

    def get_urls(self) -> list[URLResolver | URLPattern]:
        self._discover()
        return super().get_urls()

    def index(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> TemplateResponse:
        from health.home import home_data  # the home's queries load with the page
        from schedules.next_fire import firing_warning

        extra = {
            "home": home_data(user=request.user),
            "firing_warning": firing_warning(),
            **(extra_context or {}),
        }
        return super().index(request, extra)


class FlowpilotAdminConfig(SimpleAdminConfig):
    """``django.contrib.admin`` with ``FlowpilotAdminSite`` as ``admin.site``."""

    default_site = "config.admin.FlowpilotAdminSite"
