"""The admin's OpenAPI import page (Tools → Import OpenAPI), in two steps.

1. *Read*: an uploaded document or a URL on the allowed hosts (``SourceForm``), and
   optionally tags and path prefixes that narrow the list; the document's text is
   kept in the user's session for the next step.
2. *Import*: the operations chosen (tag, operationId, method and path shown) are
   written and loaded by ``openapi_import_load`` — the files under
   ``FLOWPILOT_OPENAPI_IMPORT_DIR/<prefix>/``, the tools into the registry — and the
   page lists the files, the tools and every unsupported construct, and warns of each
   operation that could not be imported (listed already in step 2; the others are
   imported all the same).

Staff with ``tools.add_tool`` and ``tools.change_tool`` only; the admin's
``admin_view`` adds the login check and CSRF protection.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import ngettext

from tools.errors import ToolConfigError
from tools.openapi.document import openapi_parse
from tools.openapi.forms import SelectForm, SourceForm
from tools.openapi.generate import Selection, openapi_operations, openapi_tools
from tools.openapi.services import IMPORT_PERMISSIONS, openapi_import_load

SESSION_KEY = "flowpilot_openapi_import"
TEMPLATE = "tools/openapi/import.html"


def openapi_import_view(model_admin: admin.ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    if not request.user.has_perms(IMPORT_PERMISSIONS):
        raise PermissionDenied
    if request.method == "POST" and "import" in request.POST:
        return _import(model_admin, request)
    if request.method == "POST":
        form = SourceForm(request.POST, request.FILES)
        if form.is_valid():
            data = form.cleaned_data
            request.session[SESSION_KEY] = {
                "source": data["source"],
                "text": data["text"],
                "prefix": data["prefix"],
                "tags": data["tags"],
                "path_prefixes": data["path_prefixes"],
            }
            try:
                return _choose(model_admin, request, data["parsed"], SelectForm(operations=[]))
            except ToolConfigError as exc:  # e.g. references that expand past the bounds
                del request.session[SESSION_KEY]
                form.add_error(None, exc.message)
    else:
        form = SourceForm()
    return _render(model_admin, request, step="source", form=form)


def _choose(
    model_admin: admin.ModelAdmin[Any],
    request: HttpRequest,
    document: dict[str, Any],
    form: SelectForm,
) -> HttpResponse:
    stored = request.session[SESSION_KEY]
    selection = Selection.of(stored.get("tags", ""), stored.get("path_prefixes", ""))
    operations = [op for op in openapi_operations(document) if selection.keeps(op)]
    form.set_operations(operations)
    preview = openapi_tools(
        document,
        prefix=stored["prefix"],
        tags=selection.tags,
        path_prefixes=selection.path_prefixes,
    )
    return _render(
        model_admin,
        request,
        step="choose",
        form=form,
        source=stored["source"],
        prefix=stored["prefix"],
        operations=operations,
        unsupported=preview.unsupported,
        skipped=preview.skipped,
        preselect=bool(selection.tags or selection.path_prefixes),
    )


def _import(model_admin: admin.ModelAdmin[Any], request: HttpRequest) -> HttpResponse:
    stored = request.session.get(SESSION_KEY)
    if not stored:
        model_admin.message_user(request, "Read a document first.", messages.ERROR)
        return _render(model_admin, request, step="source", form=SourceForm())
    document = openapi_parse(stored["text"], source=stored["source"])
    form = SelectForm(request.POST, operations=openapi_operations(document))
    if not form.is_valid():
        return _choose(model_admin, request, document, form)
    try:
        report = openapi_import_load(
            document=document,
            source=stored["source"],
            prefix=stored["prefix"],
            operations=form.cleaned_data["operations"],
            overwrite=form.cleaned_data["overwrite"],
            actor=request.user,
        )
    except ToolConfigError as exc:
        form.add_error(None, exc.message)
        return _choose(model_admin, request, document, form)
    del request.session[SESSION_KEY]
    count = len(report.loaded)
    model_admin.message_user(
        request,
        ngettext("%(count)d tool was imported.", "%(count)d tools were imported.", count)
        % {"count": count},
        messages.ERROR if report.errors else messages.SUCCESS,
    )
    for skipped in report.skipped:
        model_admin.message_user(request, f"Skipped {skipped}", messages.WARNING)
    return _render(model_admin, request, step="done", report=report, source=stored["source"])


def _render(
    model_admin: admin.ModelAdmin[Any], request: HttpRequest, **context: Any
) -> HttpResponse:
    opts = model_admin.model._meta
    return TemplateResponse(
        request,
        TEMPLATE,
        {
            **model_admin.admin_site.each_context(request),
            "title": "Import tools from an OpenAPI document",
            "opts": opts,
            **context,
        },
    )
