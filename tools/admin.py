"""Tool admin: browse, search, and enable/disable tools (through a service), see each
tool's versions and compare two (``tools.versions``), import tools from an OpenAPI
document (``tools/openapi/admin_views.py``); the circuit
breakers per host, with a reset; stored credentials, whose secret values are typed
once and never shown again."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Model, OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.translation import ngettext

from tools.breaker.core import BreakerStore
from tools.breaker.selectors import breakers_list
from tools.breaker.services import RESET_PERMISSION, breakers_reset
from tools.breaker.setup import (
    breaker_backend,
    breaker_policy_from_settings,
    breaker_store_from_settings,
)
from tools.credentials.admin_views import ConsentAdminMixin
from tools.credentials.crypto import CredentialKeyError, fernets
from tools.credentials.kinds import (
    CLEAR_FIELDS,
    KINDS,
    SECRET_FIELDS,
    VAULT_FIELDS,
    field_problems,
    vault_problems,
)
from tools.credentials.store import save_credential, vault_ref
from tools.models import Breaker, Credential, Tool, ToolRevision, ToolSource
from tools.openapi import IMPORT_PERMISSIONS
from tools.permissions import PermissionRefused
from tools.pins import VersionNotFound, tool_versions, tool_versions_diff
from tools.services import tools_set_enabled
from tools.sources import source_state


@admin.register(Tool)
class ToolAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "kind",
        "version",
        "enabled",
        "lifecycle",
        "origin",
        "refreshed_at",
        "updated_at",
    )
    list_filter = ("kind", "enabled", "deprecated")
    search_fields = ("name", "description", "source")
    ordering = ("name",)
    readonly_fields = (
        "pretty_spec",
        "pretty_input_schema",
        "origin",
        "version",
        "versions",
        "lifecycle",
        "refreshed_at",
        "created_at",
        "updated_at",
    )
    fields = (
        "name",
        "kind",
        "version",
        "enabled",
        "lifecycle",
        "description",
        "outputs",
        "origin",
        "source",
        "versions",
        "pretty_input_schema",
        "pretty_spec",
        "refreshed_at",
        "created_at",
        "updated_at",
    )
    actions = ("enable_tools", "disable_tools")
    change_list_template = "tools/tool/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        # Definitions come from files (`loadtools`, the OpenAPI import page) and providers;
        # only `enabled` is edited here.
        return False

    def get_urls(self) -> list[URLPattern]:
        view = self.admin_site.admin_view(self.import_openapi_view)
        diff = self.admin_site.admin_view(self.versions_diff_view)
        return [
            path("import-openapi/", view, name="tools_tool_import_openapi"),
            path("<int:object_id>/versions/", diff, name="tools_tool_versions_diff"),
            *super().get_urls(),
        ]

    def get_queryset(self, request: HttpRequest) -> QuerySet[Tool]:
        # The newest recorded version, in the list's one query (a tool's definition is
        # recorded whenever it changes, so the newest is the one it has).
        newest = ToolRevision.objects.filter(tool_name=OuterRef("name")).order_by("-number")
        return (
            super()
            .get_queryset(request)
            .annotate(newest_version=Subquery(newest.values("version")[:1]))
        )

    @admin.display(description="Version")
    def version(self, obj: Tool) -> str:
        return getattr(obj, "newest_version", None) or "-"

    @admin.display(description="Versions")
    def versions(self, obj: Tool) -> str:
        """Every version, newest first, with what changed in each, and a link to compare."""
        rows = tool_versions(name=obj.name)
        if not rows:
            return "-"
        url = reverse("admin:tools_tool_versions_diff", args=[obj.pk])
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    r.number, r.version, r.bump or "first", r.created_at.strftime("%Y-%m-%d %H:%M"),
                    "; ".join(f"{c['level']}: {c['what']}" for c in r.changes or []) or "-",
                )
                for r in rows
            ),
        )  # fmt: skip
        compare = ""
        if len(rows) > 1:
            compare = format_html(
                '<p><a href="{}?a={}&amp;b={}" id="fp-compare-versions">Compare versions</a></p>',
                url, rows[1].number, rows[0].number,
            )  # fmt: skip
        return format_html(
            '<table id="fp-tool-versions"><thead><tr><th>#</th><th>version</th><th>bump</th>'
            "<th>recorded</th><th>what changed</th></tr></thead><tbody>{}</tbody></table>{}",
            body, compare,
        )  # fmt: skip

    def versions_diff_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """What changed between two versions of a tool (``?a=`` and ``?b=``: numbers or
        semantic versions; by default the one before the newest and the newest)."""
        tool = self.get_object(request, str(object_id))
        if tool is None or not self.has_view_permission(request, tool):
            raise PermissionDenied
        rows = tool_versions(name=tool.name)
        default_a = rows[1].number if len(rows) > 1 else (rows[0].number if rows else 1)
        a = request.GET.get("a", str(default_a))[:32]
        b = request.GET.get("b", str(rows[0].number if rows else 1))[:32]
        diff, error = None, ""
        try:
            diff = tool_versions_diff(name=tool.name, old=a, new=b)
        except VersionNotFound as exc:
            error = str(exc)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"{tool.name}: versions",
            "tool": tool,
            "versions": rows,
            "diff": diff,
            "error": error,
        }
        return TemplateResponse(request, "tools/tool/versions_diff.html", context)

    def import_openapi_view(self, request: HttpRequest) -> HttpResponse:
        # The OpenAPI parsing and generating modules load with the import page, not
        # with the admin (which every command's URL checks import).
        from tools.openapi.admin_views import openapi_import_view

        return openapi_import_view(self, request)

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        can_import = request.user.has_perms(IMPORT_PERMISSIONS)
        return super().changelist_view(
            request, {"can_import_openapi": can_import, **(extra_context or {})}
        )

    def get_readonly_fields(self, request: HttpRequest, obj: Tool | None = None) -> tuple[str, ...]:
        return (*self.readonly_fields, "name", "kind", "description", "outputs", "source")

    @admin.display(description="Origin")
    def origin(self, obj: Tool) -> str:
        """The file, MCP server or built-in provider it came from."""
        return obj.origin

    @admin.display(description="Lifecycle", ordering="deprecated")
    def lifecycle(self, obj: Tool) -> str:
        if not obj.deprecated:
            return "current"
        return f"deprecated → {obj.replacement}" if obj.replacement else "deprecated"

    @admin.display(description="Spec (templates only, no secrets)")
    def pretty_spec(self, obj: Tool) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.spec, indent=2, sort_keys=True))

    @admin.display(description="Input schema")
    def pretty_input_schema(self, obj: Tool) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.input_schema, indent=2))

    def _set_enabled(self, request: HttpRequest, queryset: QuerySet[Tool], enabled: bool) -> None:
        try:
            changed = tools_set_enabled(tools=queryset, enabled=enabled, actor=request.user)
        except PermissionRefused as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return
        verb = "enabled" if enabled else "disabled"
        self.message_user(
            request,
            ngettext("%(count)d tool was %(verb)s.", "%(count)d tools were %(verb)s.", changed)
            % {"count": changed, "verb": verb},
            messages.SUCCESS,
        )

    @admin.action(description="Enable selected tools", permissions=["change"])
    def enable_tools(self, request: HttpRequest, queryset: QuerySet[Tool]) -> None:
        self._set_enabled(request, queryset, True)

    @admin.action(description="Disable selected tools", permissions=["change"])
    def disable_tools(self, request: HttpRequest, queryset: QuerySet[Tool]) -> None:
        self._set_enabled(request, queryset, False)


@admin.register(Breaker)
class BreakerAdmin(admin.ModelAdmin):
    """Circuit breakers per host, read from the store the workers share (Redis or the
    database), so the page is not a queryset changelist. Resetting needs the
    ``tools.reset_breaker`` permission; it goes through ``breakers_reset``."""

    change_list_template = "tools/breaker/change_list.html"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        if not self.has_view_permission(request):
            raise PermissionDenied
        store = breaker_store_from_settings()
        if store is None:
            self.message_user(request, "Circuit breakers are off.", messages.WARNING)
            return redirect("admin:index")
        try:
            if request.method == "POST":
                self._reset(request, store)
                return redirect(request.path)
            context = {
                **self.admin_site.each_context(request),
                "title": "Circuit breakers",
                "opts": self.model._meta,
                "rows": breakers_list(store=store),
                "backend": breaker_backend(),
                "policy": breaker_policy_from_settings(),
                "can_reset": request.user.has_perm(RESET_PERMISSION),
                **(extra_context or {}),
            }
        finally:
            store.close()
        return TemplateResponse(request, self.change_list_template, context)

    def _reset(self, request: HttpRequest, store: BreakerStore) -> None:
        everything = request.POST.get("action") == "reset_all"
        hosts = None if everything else request.POST.getlist("host")
        count = breakers_reset(store=store, hosts=hosts, user=request.user)
        self.message_user(
            request,
            ngettext("%(count)d breaker was reset.", "%(count)d breakers were reset.", count)
            % {"count": count},
            messages.SUCCESS,
        )


@admin.register(ToolSource)
class ToolSourceAdmin(admin.ModelAdmin):
    """The MCP server files and OpenAPI documents tools are read from, each with its
    state (ok, stale, unavailable), its own version and tools; read again with
    **Refresh now** (beat does it every ``refresh_hours``)."""

    list_display = (
        "name", "kind", "location", "reported", "state", "refreshed_at", "attempted_at",
        "tool_count",
    )  # fmt: skip
    list_filter = ("kind", "available")
    search_fields = ("name", "location", "reported_name")
    ordering = ("kind", "name")
    fields = (
        "kind", "name", "location", "reported_name", "reported_version", "state",
        "refresh_hours", "refreshed_at", "attempted_at", "error", "options", "tools",
        "created_at",
    )  # fmt: skip
    readonly_fields = tuple(f for f in fields if f != "refresh_hours")
    actions = ("refresh_now",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # recorded by loadtools and the OpenAPI import

    @admin.display(description="its own name and version")
    def reported(self, obj: ToolSource) -> str:
        return " ".join(p for p in (obj.reported_name, obj.reported_version) if p) or "-"

    @admin.display(description="state")
    def state(self, obj: ToolSource) -> str:
        return source_state(obj)

    @admin.display(description="tools")
    def tool_count(self, obj: ToolSource) -> int:
        return len(obj.tools or [])

    @admin.action(
        description="Refresh now: read the selected sources again", permissions=["change"]
    )
    def refresh_now(self, request: HttpRequest, queryset: QuerySet[ToolSource]) -> None:
        # The OpenAPI importer loads with a refresh, not with the admin.
        from tools.source_refresh import sources_refresh

        names = list(queryset.values_list("location", flat=True))
        for result in sources_refresh(names=names):
            level = messages.SUCCESS if result.ok else messages.ERROR
            self.message_user(request, f"{result.source.name}: {result.message}", level)


@admin.register(ToolRevision)
class ToolRevisionAdmin(admin.ModelAdmin):
    """Every definition each tool has had (a row per change), read-only."""

    list_display = (
        "tool_name", "number", "version", "bump", "kind", "short_hash", "source", "created_at",
    )  # fmt: skip
    list_filter = ("kind", "bump")
    search_fields = ("tool_name", "hash", "version")
    ordering = ("tool_name", "-number", "-id")
    fields = (
        "tool_name", "number", "version", "bump", "kind", "hash", "source", "created_at",
        "pretty_changes", "pretty_spec",
    )  # fmt: skip
    readonly_fields = fields

    @admin.display(description="what changed since the version before")
    def pretty_changes(self, obj: ToolRevision) -> str:
        if not obj.changes:
            return "- (the first version)" if obj.number == 1 else "-"
        return format_html(
            "<ul>{}</ul>",
            format_html_join(
                "", "<li><strong>{}</strong> {} <code>{}</code></li>",
                ((c["level"], c["what"], c["path"]) for c in obj.changes),
            ),
        )  # fmt: skip

    @admin.display(description="hash")
    def short_hash(self, obj: ToolRevision) -> str:
        return obj.hash[:12]

    @admin.display(description="definition")
    def pretty_spec(self, obj: ToolRevision) -> str:
        return format_html("<pre>{}</pre>", json.dumps(obj.spec, indent=2, sort_keys=True))

    def has_add_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Model | None = None) -> bool:
        return False


def _secret_input(help_text: str) -> forms.CharField:
    return forms.CharField(
        required=False,
        strip=False,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text=f"{help_text} Leave empty to keep the stored value.",
    )


class CredentialForm(forms.ModelForm):
    """A credential's clear fields, and one password input per secret field: never
    filled in when shown, and a value changes only when a new one is typed."""

    value = _secret_input("api_key, header, query: the key or header value.")
    token = _secret_input("bearer: the token.")
    password = _secret_input("basic: the password.")
    client_secret = _secret_input("oauth2: the client secret.")
    access_token = _secret_input("oauth2_authorization_code: an access token.")
    refresh_token = _secret_input("oauth2_authorization_code: a refresh token.")
    unset = forms.MultipleChoiceField(
        choices=[(name, name) for name in SECRET_FIELDS],
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="Remove these stored values.",
    )

    class Meta:
        model = Credential
        fields = (
            "name", "type", "description", "location", "key_name", "username", "client_id",
            "token_url", "authorize_url", "scopes", "expires_at", "needs_reconnect",
            "source", "vault_mount", "vault_path", "vault_key",
        )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["source"].required = False  # left out: the database

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        data["source"] = data.get("source") or "database"
        type_ = data.get("type") or ""
        for field, problem in field_problems(type_, data).items():
            self.add_error(field if field in self.fields else None, problem)
        for field, problem in vault_problems(data.get("source") or "", type_, data).items():
            self.add_error(field if field in self.fields else None, problem)
        kind = KINDS.get(type_)
        typed = [name for name in SECRET_FIELDS if data.get(name)]
        if typed and data.get("source") == "vault":
            self.add_error(
                typed[0], "a credential kept in Vault has no value here: change it in Vault"
            )
            return data
        for name in [*typed, *(data.get("unset") or [])]:
            if kind is not None and name not in kind.secrets:
                self.add_error(
                    name if name in typed else "unset",
                    f"{name} is not a secret of a {type_} credential",
                )
        if typed:
            try:
                fernets()
            except CredentialKeyError as exc:
                raise forms.ValidationError(exc.message) from exc
        return data

    def new_values(self) -> dict[str, str]:
        return {name: self.cleaned_data[name] for name in SECRET_FIELDS if self.cleaned_data[name]}


SECRET_INPUTS = ("values_set", *SECRET_FIELDS, "unset")
STATUS_FIELDS = ("last_used_at", "expires_at", "needs_reconnect", "created_at", "updated_at")


@admin.register(Credential)
class CredentialAdmin(ConsentAdminMixin, admin.ModelAdmin):
    """Stored credentials (docs/credentials.md): the clear fields are edited as they
    are; a secret value is typed once and shown only as "set" / "not set". An
    oauth2_authorization_code one has Connect / Disconnect (``ConsentAdminMixin``)."""

    form = CredentialForm
    change_form_template = "tools/credential/change_form.html"
    list_display = ("name", "type", "values_set", "last_used_at", "expires_at", "needs_reconnect")
    list_filter = ("type", "needs_reconnect")
    search_fields = ("name", "description")
    readonly_fields = ("values_set", "last_used_at", "created_at", "updated_at")
    fieldsets = (
        (None, {"fields": ("name", "type", "description")}),
        ("How it is sent", {"fields": CLEAR_FIELDS}),
        ("Where the value is", {"fields": ("source", *VAULT_FIELDS)}),
        ("Secret values (typed once, never shown again)", {"fields": SECRET_INPUTS}),
        ("Status", {"fields": STATUS_FIELDS}),
    )

    @admin.display(description="values")
    def values_set(self, obj: Credential) -> str:
        kind = KINDS.get(obj.type)
        if kind is None:
            return "-"
        ref = vault_ref(obj)
        if ref is not None:
            return f"in Vault at {ref.where}"
        stored = set(obj.secret_fields or [])
        return ", ".join(
            f"{name}: {'set' if name in stored else 'not set'}" for name in kind.secrets
        )

    def save_model(
        self, request: HttpRequest, obj: Credential, form: forms.ModelForm, change: bool
    ) -> None:
        assert isinstance(form, CredentialForm)
        save_credential(obj, form.new_values(), unset=form.cleaned_data.get("unset") or ())
