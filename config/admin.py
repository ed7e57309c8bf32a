"""The admin site, its modules loaded when the admin is first used, not at start-up.

Django's ``AdminConfig`` imports every app's ``admin`` module in ``django.setup()``,
and those import the services, the engine and their SDKs: every management command,
Celery worker and subprocess paid for pages it never shows. ``FlowpilotAdminConfig``
is ``SimpleAdminConfig`` (no discovery in ``ready()``) with a site that discovers the
admin modules the first time something asks it for its models: its URLs (the URL
conf, so every request and ``manage.py check``'s URL checks) or its system checks.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.apps import AppConfig
from django.contrib import admin
from django.contrib.admin.apps import SimpleAdminConfig
from django.core.checks import CheckMessage
from django.urls import URLPattern, URLResolver


class FlowpilotAdminSite(admin.AdminSite):
    """The default admin site; every app's ``admin`` module registered on first use."""

    def check(self, app_configs: Sequence[AppConfig] | None) -> list[CheckMessage]:
        admin.autodiscover()
        return super().check(app_configs)

    def get_urls(self) -> list[URLResolver | URLPattern]:
        admin.autodiscover()
        return super().get_urls()


class FlowpilotAdminConfig(SimpleAdminConfig):
    """``django.contrib.admin`` with ``FlowpilotAdminSite`` as ``admin.site``."""

    default_site = "config.admin.FlowpilotAdminSite"
