"""``/api/v1/``: every resource, the OpenAPI 3.1 schema, Swagger UI and Redoc."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

from api.schema_cache import CachedSchemaGenerator
from api.views.approvals import ApprovalViewSet
from api.views.credentials import CredentialViewSet
from api.views.design import PlanViewSet, VersionDesignViewSet
from api.views.runs import RunViewSet
from api.views.schedules import ScheduleViewSet
from api.views.tools import ToolViewSet
from api.views.triggers import EventTriggerViewSet, TriggerEventViewSet
from api.views.webhooks import HookView, WebhookViewSet
from api.views.workflows import WorkflowViewSet

VERSION = "workflows/<slug:name>/versions/<int:version>/"
SCHEDULE = "schedules/<slug:workflow>/<slug:name>/"
CREDENTIAL = "credentials/<slug:name>/"

urlpatterns = [
    path(
        "schema/",
        SpectacularAPIView.as_view(generator_class=CachedSchemaGenerator),
        name="api-schema",
    ),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    path("tools/", ToolViewSet.as_view({"get": "list"}), name="tool-list"),
    path("tools/load/", ToolViewSet.as_view({"post": "load"}), name="tool-load"),
    path("tools/<slug:name>/", ToolViewSet.as_view({"get": "retrieve"}), name="tool-detail"),
    path(
        "tools/<slug:name>/versions/",
        ToolViewSet.as_view({"get": "versions"}),
        name="tool-versions",
    ),
    path(
        "tools/<slug:name>/versions/diff/",
        ToolViewSet.as_view({"get": "versions_diff"}),
        name="tool-versions-diff",
    ),
    path(
        "workflows/",
        WorkflowViewSet.as_view({"get": "list", "post": "create"}),
        name="workflow-list",
    ),
    path(
        "workflows/validate/",
        WorkflowViewSet.as_view({"post": "validate"}),
        name="workflow-validate",
    ),
    path(
        "workflows/<slug:name>/versions/",
        WorkflowViewSet.as_view({"get": "versions"}),
        name="workflow-versions",
    ),
    path(VERSION, WorkflowViewSet.as_view({"get": "retrieve"}), name="workflow-detail"),
    path(VERSION + "export/", WorkflowViewSet.as_view({"get": "export"}), name="workflow-export"),
    path(
        VERSION + "archive/", WorkflowViewSet.as_view({"post": "archive"}), name="workflow-archive"
    ),
    path(VERSION + "replay/", WorkflowViewSet.as_view({"post": "replay"}), name="workflow-replay"),
    path(
        VERSION + "tests/",
        WorkflowViewSet.as_view({"get": "tests", "post": "tests_run"}),
        name="workflow-tests",
    ),
    path(
        VERSION + "approve/",
        VersionDesignViewSet.as_view({"post": "approve"}),
        name="workflow-approve",
    ),
    path(
        VERSION + "reject/",
        VersionDesignViewSet.as_view({"post": "reject"}),
        name="workflow-reject",
    ),
    path(
        VERSION + "revise/",
        VersionDesignViewSet.as_view({"post": "revise"}),
        name="workflow-revise",
    ),
    path("plans/", PlanViewSet.as_view({"get": "list", "post": "create"}), name="plan-list"),
    path("plans/<int:pk>/", PlanViewSet.as_view({"get": "retrieve"}), name="plan-detail"),
    path("runs/", RunViewSet.as_view({"get": "list", "post": "create"}), name="run-list"),
    path("runs/<int:pk>/", RunViewSet.as_view({"get": "retrieve"}), name="run-detail"),
    path("runs/<int:pk>/cancel/", RunViewSet.as_view({"post": "cancel"}), name="run-cancel"),
    path("runs/<int:pk>/resume/", RunViewSet.as_view({"post": "resume"}), name="run-resume"),
    path("runs/<int:pk>/restart/", RunViewSet.as_view({"post": "restart"}), name="run-restart"),
    path("runs/<int:pk>/wait/", RunViewSet.as_view({"get": "wait"}), name="run-wait"),
    path(
        "webhooks/",
        WebhookViewSet.as_view({"get": "list", "post": "create"}),
        name="webhook-list",
    ),
    path(
        "webhooks/<int:pk>/",
        WebhookViewSet.as_view({"get": "retrieve", "patch": "partial_update", "delete": "destroy"}),
        name="webhook-detail",
    ),
    path(
        "webhooks/<int:pk>/rotate/",
        WebhookViewSet.as_view({"post": "rotate"}),
        name="webhook-rotate",
    ),
    path(
        "schedules/",
        ScheduleViewSet.as_view({"get": "list", "post": "create"}),
        name="schedule-list",
    ),
    path(
        SCHEDULE,
        ScheduleViewSet.as_view({"get": "retrieve", "put": "update", "delete": "destroy"}),
        name="schedule-detail",
    ),
    path(SCHEDULE + "pause/", ScheduleViewSet.as_view({"post": "pause"}), name="schedule-pause"),
    path(SCHEDULE + "resume/", ScheduleViewSet.as_view({"post": "resume"}), name="schedule-resume"),
    path(SCHEDULE + "fires/", ScheduleViewSet.as_view({"get": "fires"}), name="schedule-fires"),
    path(
        "credentials/",
        CredentialViewSet.as_view({"get": "list", "post": "create"}),
        name="credential-list",
    ),
    path(
        CREDENTIAL,
        CredentialViewSet.as_view({"get": "retrieve", "patch": "partial_update"}),
        name="credential-detail",
    ),
    path(
        CREDENTIAL + "connect/",
        CredentialViewSet.as_view({"post": "connect"}),
        name="credential-connect",
    ),
    path(
        CREDENTIAL + "disconnect/",
        CredentialViewSet.as_view({"post": "disconnect"}),
        name="credential-disconnect",
    ),
    path("approvals/", ApprovalViewSet.as_view({"get": "list"}), name="approval-list"),
    path(
        "approvals/<int:pk>/", ApprovalViewSet.as_view({"get": "retrieve"}), name="approval-detail"
    ),
    path(
        "approvals/<int:pk>/approve/",
        ApprovalViewSet.as_view({"post": "approve"}),
        name="approval-approve",
    ),
    path(
        "approvals/<int:pk>/reject/",
        ApprovalViewSet.as_view({"post": "reject"}),
        name="approval-reject",
    ),
    path("triggers/", EventTriggerViewSet.as_view({"get": "list"}), name="trigger-list"),
    path(
        "triggers/<int:pk>/",
        EventTriggerViewSet.as_view({"get": "retrieve"}),
        name="trigger-detail",
    ),
    path(
        "triggers/<int:pk>/poll/",
        EventTriggerViewSet.as_view({"post": "poll"}),
        name="trigger-poll",
    ),
    path(
        "trigger-events/", TriggerEventViewSet.as_view({"get": "list"}), name="trigger-event-list"
    ),
    path(
        "trigger-events/<int:pk>/",
        TriggerEventViewSet.as_view({"get": "retrieve"}),
        name="trigger-event-detail",
    ),
    path("hooks/<slug:public_id>/", HookView.as_view({"post": "deliver"}), name="webhook-deliver"),
]
