"""Registered tools. One row per tool name; the normalized spec lives in ``spec``."""

from django.db import models


class ToolKind(models.TextChoices):
    HTTP = "http", "HTTP"
    BUILTIN = "builtin", "Built-in"
    MCP = "mcp", "MCP server"


class Tool(models.Model):
    name = models.CharField(
        max_length=64, unique=True, help_text="Tool name, `^[a-zA-Z0-9_-]{1,64}$` (no dots)."
    )
    kind = models.CharField(max_length=16, choices=ToolKind.choices, help_text="How it is called.")
    description = models.TextField(
        blank=True, help_text="What the tool does, for people and the planner."
    )
    input_schema = models.JSONField(default=dict, help_text="JSON Schema of the tool's inputs.")
    outputs = models.JSONField(default=list, blank=True, help_text="Output field names.")
    spec = models.JSONField(default=dict, help_text="The normalized tool definition (no secrets).")
    source = models.CharField(
        max_length=500, blank=True, help_text="File the tool was loaded from."
    )
    enabled = models.BooleanField(default=True, help_text="Disabled tools cannot be called.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=["http", "builtin", "mcp"]), name="tool_kind_valid"
            ),
            models.CheckConstraint(
                condition=models.Q(name__regex=r"^[a-zA-Z0-9_-]{1,64}$"), name="tool_name_valid"
            ),
        ]

    def __str__(self) -> str:
        return self.name
