"""What several API views share: the Idempotency-Key header."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter

IDEMPOTENCY_KEY = OpenApiParameter(
    "Idempotency-Key",
    # What runs.idempotency accepts: 1 to 255 printable characters, not only blanks
    # (printable ASCII here: a header carries no other text safely).
    {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]*[!-~][ -~]*$"},
    OpenApiParameter.HEADER,
    required=False,
    description="Repeat a request safely: the same key returns the same run, never a second.",
)
