"""The admin's Connect, callback and Disconnect views of an
``oauth2_authorization_code`` credential (:mod:`tools.credentials.consent`).

Mixed into ``tools.admin.CredentialAdmin``. Every view is staff-only (wrapped by
``admin_site.admin_view``) and needs the change permission on credentials. The
callback is one URL for every credential (the redirect URI registered with the
provider): the ``state`` says which credential, and a state is only accepted from
the session that pressed Connect. Disconnect is a POST (with Django's CSRF check)
after a confirmation page. authlib is imported when a view is used.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse

from tools.credentials.crypto import CredentialKeyError
from tools.credentials.kinds import CLEAR_FIELDS, field_problems
from tools.models import Credential

CALLBACK_NAME = "tools_credential_oauth2_callback"


def callback_url(request: HttpRequest) -> str:
    """The redirect URI: this site's callback, as the browser reaches it."""
    return request.build_absolute_uri(reverse(f"admin:{CALLBACK_NAME}"))


def _page(pk: int | None) -> HttpResponseRedirect:
    if pk is not None and Credential.objects.filter(pk=pk).exists():
        return HttpResponseRedirect(reverse("admin:tools_credential_change", args=[pk]))
    return HttpResponseRedirect(reverse("admin:tools_credential_changelist"))


class ConsentAdminMixin(admin.ModelAdmin):
    """Adds ``<id>/connect/``, ``<id>/disconnect/`` and ``oauth2/callback/``."""

    def get_urls(self) -> list[URLPattern]:
        wrap = self.admin_site.admin_view
        return [
            path("oauth2/callback/", wrap(self.oauth2_callback), name=CALLBACK_NAME),
            path(
                "<int:object_id>/connect/",
                wrap(self.oauth2_connect),
                name="tools_credential_oauth2_connect",
            ),
            path(
                "<int:object_id>/disconnect/",
                wrap(self.oauth2_disconnect),
                name="tools_credential_oauth2_disconnect",
            ),
            *super().get_urls(),
        ]

    def _changeable(self, request: HttpRequest, object_id: int) -> Credential:
        credential = get_object_or_404(Credential, pk=object_id)
        if not self.has_change_permission(request, credential):
            raise PermissionDenied
        return credential

    def oauth2_connect(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """Redirect to the provider's consent page."""
        from tools.credentials.consent import ConsentError, begin_consent

        credential = self._changeable(request, object_id)
        clear = {name: str(getattr(credential, name) or "") for name in CLEAR_FIELDS}
        problems = field_problems(credential.type, clear)
        try:
            if problems:
                raise ConsentError(
                    f"credential {credential.name!r} cannot be connected: "
                    + "; ".join(problems.values()),
                    credential.pk,
                )
            url = begin_consent(credential, request.session, callback_url(request))
        except (ConsentError, CredentialKeyError) as exc:
            messages.error(request, exc.message)
            return _page(credential.pk)
        return HttpResponseRedirect(url)

    def oauth2_callback(self, request: HttpRequest) -> HttpResponse:
        """The provider sends the browser back here with a code (or an error)."""
        from tools.credentials.consent import ConsentError, finish_consent

        if not self.has_change_permission(request):
            raise PermissionDenied
        try:
            connected = finish_consent(request.session, request.GET.dict())
        except (ConsentError, CredentialKeyError) as exc:
            pk = exc.credential if isinstance(exc, ConsentError) else None
            messages.error(request, exc.message)
            return _page(pk)
        credential = connected.credential
        granted = " ".join(connected.scopes) or "(none named)"
        expires = (
            f"; the access token expires at {connected.expires_at:%Y-%m-%d %H:%M:%S %Z}"
            if connected.expires_at
            else ""
        )
        messages.success(
            request,
            f"credential {credential.name!r} is connected: scopes granted: {granted}{expires}",
        )
        asked = set(credential.scopes.split())
        if asked - set(connected.scopes) and connected.scopes:
            missing = " ".join(sorted(asked - set(connected.scopes)))
            messages.warning(request, f"the provider did not grant: {missing}")
        return _page(credential.pk)

    def oauth2_disconnect(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """A confirmation page; its POST revokes and clears the tokens."""
        from tools.credentials.consent import disconnect

        credential = self._changeable(request, object_id)
        if request.method == "POST":
            try:
                said = disconnect(credential)
            except CredentialKeyError as exc:
                messages.error(request, exc.message)
            else:
                messages.success(request, said)
            return _page(credential.pk)
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "title": f"Disconnect {credential.name}?",
            "credential": credential,
            "opts": self.model._meta,
            "revokes": bool(credential.revocation_url),
        }
        return TemplateResponse(request, "tools/credential/disconnect.html", context)
