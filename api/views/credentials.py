"""Stored credentials: list, detail, create, update, connect and disconnect an OAuth2
account. Values are write-only: no answer ever holds one (docs/credentials.md)."""

from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.authentication import SessionAuthentication
from rest_framework.request import Request
from rest_framework.response import Response

from api.exceptions import ApiError
from api.serializers.credentials import (
    CLEAR,
    CredentialConnectSerializer,
    CredentialDisconnectSerializer,
    CredentialSerializer,
    CredentialWriteSerializer,
)
from tools.credentials.crypto import CredentialKeyError
from tools.credentials.kinds import CLEAR_FIELDS, SECRET_FIELDS, field_problems
from tools.credentials.store import CredentialInvalid, save_credential
from tools.models import Credential

VIEW = "tools.view_credential"
CHANGE = "tools.change_credential"


def invalid(problems: Mapping[str, str], name: str) -> ApiError:
    """400 ``credential_invalid``: each problem with the field it is about."""
    details = [
        {"path": field, "code": "invalid", "message": problem}
        for field, problem in sorted(problems.items())
    ]
    first = details[0]
    return ApiError(
        f"credential {name!r}: {first['path']}: {first['message']}",
        code="credential_invalid",
        status_code=status.HTTP_400_BAD_REQUEST,
        details=details,
    )


def key_missing(exc: CredentialKeyError) -> ApiError:
    return ApiError(
        exc.message, code="credential_key_error", status_code=status.HTTP_503_SERVICE_UNAVAILABLE
    )


def _save(credential: Credential, data: Mapping[str, Any]) -> Credential:
    for field in CLEAR:
        if field in data:
            setattr(credential, field, data[field])
    values = {name: data[name] for name in SECRET_FIELDS if data.get(name)}
    try:
        with transaction.atomic():
            return save_credential(credential, values, unset=data.get("unset", ()))
    except CredentialInvalid as exc:
        raise invalid(exc.problems, credential.name) from None
    except DjangoValidationError as exc:
        problems = {k: " ".join(v) for k, v in exc.message_dict.items()}
        raise invalid(problems, credential.name) from None
    except CredentialKeyError as exc:
        raise key_missing(exc) from None


class CredentialViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    serializer_class = CredentialSerializer
    lookup_field = "name"
    lookup_value_regex = "[A-Za-z0-9_-]{1,64}"
    pagination_class = None
    required_perms = {
        "list": [VIEW],
        "retrieve": [VIEW],
        "create": [VIEW, "tools.add_credential"],
        "partial_update": [VIEW, CHANGE],
        "connect": [VIEW, CHANGE],
        "disconnect": [VIEW, CHANGE],
    }

    def get_queryset(self) -> QuerySet[Any]:
        return Credential.objects.order_by("name")

    @extend_schema(request=CredentialWriteSerializer, responses={201: CredentialSerializer})
    def create(self, request: Request) -> Response:
        """A new credential; its secret values are encrypted and never shown again."""
        params = CredentialWriteSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        missing = {f: f"{f} is required" for f in ("name", "type") if not data.get(f)}
        if missing:
            raise invalid(missing, data.get("name", ""))
        if Credential.objects.filter(name=data["name"]).exists():
            raise invalid({"name": "a credential with this name already exists"}, data["name"])
        credential = _save(Credential(name=data["name"], type=data["type"]), data)
        return Response(CredentialSerializer(credential).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=CredentialWriteSerializer, responses={200: CredentialSerializer})
    def partial_update(self, request: Request, name: str) -> Response:
        """Change what the body names; a secret value left empty or absent is kept."""
        params = CredentialWriteSerializer(data=request.data)
        params.is_valid(raise_exception=True)
        data = params.validated_data
        credential = self.get_object()
        if data.get("name", credential.name) != credential.name:
            raise invalid(
                {"name": "a credential is not renamed: tools name it; create another"},
                credential.name,
            )
        if data.get("type"):
            credential.type = data["type"]
        return Response(CredentialSerializer(_save(credential, data)).data)

    @extend_schema(request=None, responses={200: CredentialConnectSerializer})
    def connect(self, request: Request, name: str) -> Response:
        """Where a person's browser (logged in to the admin) grants access at the provider."""
        from tools.credentials.admin_views import callback_url
        from tools.credentials.consent import ConsentError, begin_consent

        credential = self.get_object()
        if credential.type != "oauth2_authorization_code":
            raise invalid(
                {
                    "type": f"credential {credential.name!r} is a {credential.type} credential: "
                    "only an oauth2_authorization_code one is connected through a consent page"
                },
                credential.name,
            )
        clear = {field: str(getattr(credential, field) or "") for field in CLEAR_FIELDS}
        problems = field_problems(credential.type, clear)
        if problems:
            raise invalid(problems, credential.name)
        if not isinstance(request.successful_authenticator, SessionAuthentication):
            # The state must be in the session of the browser that consents: the admin's
            # Connect page, opened there, begins the consent in that session.
            page = reverse("admin:tools_credential_oauth2_connect", args=[credential.pk])
            return Response({"authorize_url": request.build_absolute_uri(page)})
        try:
            url = begin_consent(credential, request.session, callback_url(request))
        except ConsentError as exc:
            raise invalid({"type": exc.message}, credential.name) from None
        except CredentialKeyError as exc:
            raise key_missing(exc) from None
        return Response({"authorize_url": url})

    @extend_schema(request=None, responses={200: CredentialDisconnectSerializer})
    def disconnect(self, request: Request, name: str) -> Response:
        """Revoke (when a revocation_url is set) and remove an OAuth2 credential's tokens."""
        from tools.credentials.consent import disconnect

        credential = self.get_object()
        if credential.type != "oauth2_authorization_code":
            raise invalid(
                {
                    "type": f"credential {credential.name!r} is a {credential.type} credential: "
                    "only an oauth2_authorization_code one is disconnected"
                },
                credential.name,
            )
        try:
            said = disconnect(credential)
        except CredentialKeyError as exc:
            raise key_missing(exc) from None
        credential.refresh_from_db()
        body = {"message": said, "credential": CredentialSerializer(credential).data}
        return Response(body)
