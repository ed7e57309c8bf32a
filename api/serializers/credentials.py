"""Stored credentials: what is shown (never a value) and what a create or update takes."""

from typing import Any

from rest_framework import serializers

from tools.credentials.kinds import CREDENTIAL_NAME_PATTERN, SECRET_FIELDS
from tools.models import Credential, CredentialLocation, CredentialSource, CredentialType

CLEAR = [
    "description",
    "location",
    "key_name",
    "username",
    "client_id",
    "token_url",
    "authorize_url",
    "scopes",
    "revocation_url",
    "source",
    "vault_mount",
    "vault_path",
    "vault_key",
]


class StrictCharField(serializers.CharField):
    """A string, refusing a number or a boolean (DRF's CharField turns ``0`` into ``"0"``)."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class StrictRegexField(serializers.RegexField):
    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return str(super().to_internal_value(data))


class CredentialSerializer(serializers.ModelSerializer):
    """A credential as shown: clear fields, and the *names* of its secret values that
    are set (``secret_fields``), never a value."""

    secret_fields = serializers.ListField(
        child=serializers.ChoiceField(choices=SECRET_FIELDS),
        read_only=True,
        help_text="Which secret values are set (names only; a value is never shown).",
    )

    class Meta:
        model = Credential
        fields = [
            "name",
            "type",
            *CLEAR,
            "secret_fields",
            "last_used_at",
            "expires_at",
            "needs_reconnect",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields


def _secret(name: str) -> StrictCharField:
    return StrictCharField(
        required=False,
        allow_blank=True,
        write_only=True,
        trim_whitespace=False,
        max_length=10000,
        help_text=f"The {name} (write-only, never shown again); empty or absent: kept.",
    )


class CredentialWriteSerializer(serializers.Serializer):
    """A create (``name`` and ``type`` needed) or an update (what it names changes)."""

    name = StrictRegexField(CREDENTIAL_NAME_PATTERN, max_length=64, required=False)
    type = serializers.ChoiceField(choices=CredentialType.choices, required=False)
    description = StrictCharField(required=False, allow_blank=True, max_length=10000)
    location = serializers.ChoiceField(
        choices=[("", "(none)"), *CredentialLocation.choices], required=False, allow_blank=True
    )
    key_name = StrictCharField(required=False, allow_blank=True, max_length=200)
    username = StrictCharField(required=False, allow_blank=True, max_length=200)
    client_id = StrictCharField(required=False, allow_blank=True, max_length=300)
    token_url = StrictCharField(required=False, allow_blank=True, max_length=500)
    authorize_url = StrictCharField(required=False, allow_blank=True, max_length=500)
    scopes = StrictCharField(required=False, allow_blank=True, max_length=1000)
    revocation_url = StrictCharField(required=False, allow_blank=True, max_length=500)
    source = serializers.ChoiceField(choices=CredentialSource.choices, required=False)
    vault_mount = StrictCharField(required=False, allow_blank=True, max_length=200)
    vault_path = StrictCharField(required=False, allow_blank=True, max_length=500)
    vault_key = StrictCharField(required=False, allow_blank=True, max_length=200)
    value = _secret("value")
    token = _secret("token")
    password = _secret("password")
    client_secret = _secret("client_secret")
    access_token = _secret("access_token")
    refresh_token = _secret("refresh_token")
    unset = serializers.ListField(
        child=serializers.ChoiceField(choices=SECRET_FIELDS),
        required=False,
        max_length=len(SECRET_FIELDS),
        help_text="Secret values to remove (names).",
    )


class CredentialConnectSerializer(serializers.Serializer):
    authorize_url = StrictCharField(
        help_text="Open it in a browser logged in to the admin: with session authentication "
        "the provider's consent page, with token authentication the admin's Connect page "
        "(which goes on to the consent page)."
    )


class CredentialDisconnectSerializer(serializers.Serializer):
    message = StrictCharField(help_text="What happened (revoked at the provider or not).")
    credential = CredentialSerializer()
