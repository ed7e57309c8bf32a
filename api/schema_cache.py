"""The OpenAPI schema, generated once per process and kept.

drf-spectacular builds the schema from the code on every ``GET /api/v1/schema/``: it
walks every view and serializer, seconds of CPU each time, and Swagger UI and Redoc
wait for it on every page. What the public schema depends on is fixed while the
process runs: the code, the settings, the version asked for (``?version=`` or the
versioning scheme's) and the language (``?lang=``, as the view translates). It does
not depend on who asks, as long as the view serves the public schema (the default:
``SERVE_PUBLIC``), nor on the host asked (no ``servers`` are derived from the
request). So the schema is generated once per such key and the same document served
after; a private schema (filtered by the caller's permissions) is generated each time.

The kept documents are never changed after they are made (the renderers only read
them). Changing a setting in a test (Django's ``setting_changed``) forgets them.
"""

from __future__ import annotations

import threading
from typing import Any

from django.core.signals import setting_changed
from django.dispatch import receiver
from django.utils import translation
from drf_spectacular.generators import SchemaGenerator
from rest_framework.request import Request

# (url conf, version, language) -> the schema. Only ever added to: per-process
# derived data of code and settings, forgotten when a setting changes.
_SCHEMAS: dict[tuple[str | None, str | None, str | None], dict[str, Any]] = {}
_LOCK = threading.Lock()  # one generation at a time: Swagger UI and Redoc ask together
_SETTINGS = frozenset({"SPECTACULAR_SETTINGS", "REST_FRAMEWORK", "ROOT_URLCONF", "INSTALLED_APPS"})


class CachedSchemaGenerator(SchemaGenerator):
    """drf-spectacular's generator, keeping each public schema it makes."""

    def get_schema(self, request: Request | None = None, public: bool = False) -> dict[str, Any]:
        if not public or self.patterns is not None or not isinstance(self.urlconf, str | None):
            return super().get_schema(request=request, public=public)
        version = self.api_version or getattr(request, "version", None)
        key = (self.urlconf, version, translation.get_language())
        with _LOCK:
            schema = _SCHEMAS.get(key)
            if schema is None:
                schema = _SCHEMAS[key] = super().get_schema(request=request, public=public)
        return schema


@receiver(setting_changed)
def _forget_on_setting_change(*, setting: str, **kwargs: Any) -> None:
    if setting in _SETTINGS:
        with _LOCK:
            _SCHEMAS.clear()
