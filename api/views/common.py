"""What several API views share: the Idempotency-Key header."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter

IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Repeat a request safely: the same key returns the same run, never a second.",
)
