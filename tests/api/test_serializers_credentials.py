"""The credential serializers: no shown field can carry a value; the write one takes
secret values as write-only, with names checked against the store's rule."""

from __future__ import annotations

import pytest

from api.serializers.credentials import CredentialSerializer, CredentialWriteSerializer
from tools.credentials.kinds import SECRET_FIELDS
from tools.models import Credential


def test_no_shown_field_is_a_secret_or_the_ciphertext():
    shown = set(CredentialSerializer().fields)
    assert not shown & {*SECRET_FIELDS, "secrets"}
    assert {"secret_fields", "last_used_at", "expires_at", "needs_reconnect", "source"} <= shown


@pytest.mark.django_db
def test_a_saved_row_shows_the_names_of_its_values_only():
    row = Credential.objects.create(
        name="gh", type="bearer", secrets="gAAAA-cipher", secret_fields=["token"]
    )
    data = CredentialSerializer(row).data
    assert data["secret_fields"] == ["token"]
    assert "gAAAA-cipher" not in repr(data)


def test_secret_fields_are_write_only_and_kept_verbatim():
    fields = CredentialWriteSerializer().fields
    assert all(fields[name].write_only for name in SECRET_FIELDS)
    params = CredentialWriteSerializer(data={"token": "  spaced-token ", "unset": ["value"]})
    assert params.is_valid(), params.errors
    assert params.validated_data["token"] == "  spaced-token "


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"name": "Upper"}, "name"),
        ({"type": "ssh"}, "type"),
        ({"unset": ["secrets"]}, "unset"),
        ({"location": "cookie"}, "location"),
        ({"token": "a\x00b"}, "token"),
    ],
)
def test_bad_input_names_the_field(body, field):
    params = CredentialWriteSerializer(data=body)
    assert not params.is_valid()
    assert set(params.errors) == {field}


@pytest.mark.parametrize("field", ["name", "key_name", "token", "description"])
@pytest.mark.parametrize("value", [0, True, 1.5])
def test_a_number_or_a_boolean_is_not_a_string(field, value):
    params = CredentialWriteSerializer(data={field: value})
    assert not params.is_valid()
    assert set(params.errors) == {field}
