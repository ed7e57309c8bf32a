"""The admin import page's two forms: where the document comes from, then which
operations become tools."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.files.uploadedfile import UploadedFile
from django.core.validators import RegexValidator

from tools.openapi.document import (
    UPLOAD_MAX_BYTES_SETTING,
    OpenAPIError,
    max_bytes,
    openapi_parse,
    openapi_text,
    too_large,
)
from tools.openapi.generate import Operation, Selection


class SourceForm(forms.Form):
    """An uploaded document or a URL on ``FLOWPILOT_OPENAPI_HOSTS`` (the command's rules)."""

    document = forms.FileField(
        required=False,
        help_text="An OpenAPI 3.0/3.1 document, YAML or JSON (at most "
        "FLOWPILOT_OPENAPI_UPLOAD_MAX_BYTES, 5 MiB unless set).",
    )
    url = forms.URLField(
        required=False,
        max_length=2000,
        assume_scheme="https",
        help_text="Or its URL; the host must be listed in FLOWPILOT_OPENAPI_HOSTS.",
    )
    # The metaclass moves declared fields into ``base_fields``: the class attribute stays
    # BaseForm's ``prefix`` at run time, which the stubs cannot tell.
    prefix = forms.CharField(  # type: ignore[assignment]
        max_length=40,
        validators=[RegexValidator(r"^[A-Za-z][A-Za-z0-9_]*$", "letters, digits and _")],
        help_text="Names the env variables the tools read: <PREFIX>_BASE_URL, <PREFIX>_TOKEN…",
    )

    tags = forms.CharField(
        required=False,
        max_length=2000,
        help_text="Only operations with one of these tags (comma-separated); empty: all.",
    )
    path_prefixes = forms.CharField(
        required=False,
        max_length=2000,
        label="Path prefixes",
        help_text="Or whose path begins with one of these (comma-separated), e.g. /v1/customers.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload, url = data.get("document"), data.get("url")
        if bool(upload) == bool(url):
            raise forms.ValidationError("give either a document or a URL, not both or neither")
        try:
            if upload:
                data["source"], data["text"] = upload.name, _uploaded_text(upload)
            elif url:
                text = openapi_text(url, cap_setting=UPLOAD_MAX_BYTES_SETTING)
                data["source"], data["text"] = url, text
            data["parsed"] = openapi_parse(data["text"], source=data["source"])
        except OpenAPIError as exc:
            raise forms.ValidationError(exc.message) from exc
        selection = Selection.of(data.get("tags") or "", data.get("path_prefixes") or "")
        unmatched = selection.unmatched(data["parsed"], options=("tag", "", "path prefix"))
        if unmatched:
            raise forms.ValidationError(
                f"{data['source']}: no operation matches " + "; ".join(unmatched)
            )
        return data


def _uploaded_text(upload: UploadedFile) -> str:
    if (upload.size or 0) > max_bytes(UPLOAD_MAX_BYTES_SETTING):
        raise too_large(str(upload.name), UPLOAD_MAX_BYTES_SETTING)
    try:
        return upload.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise OpenAPIError(f"{upload.name}: not UTF-8 text ({exc.reason})") from exc


class SelectForm(forms.Form):
    """The operations to import, among those the document has."""

    operations = forms.MultipleChoiceField(
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "choose at least one operation to import"},
    )
    overwrite = forms.BooleanField(
        required=False, help_text="Replace tool files an earlier import wrote."
    )

    def __init__(self, *args: Any, operations: list[Operation], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.set_operations(operations)

    def set_operations(self, operations: list[Operation]) -> None:
        """Offer ``operations`` (by key) as the choices."""
        field = self.fields["operations"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.choices = [(op.key, op.key) for op in operations]
