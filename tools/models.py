"""Registered tools. One row per tool name; the normalized spec lives in ``spec``."""

from django.db import models

from tools.credentials.kinds import CREDENTIAL_NAME_PATTERN


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
        max_length=500,
        blank=True,
        help_text="Where it came from: the tool or MCP server file, or the built-in provider.",
    )
    enabled = models.BooleanField(default=True, help_text="Disabled tools cannot be called.")
    deprecated = models.BooleanField(
        default=False,
        help_text="No longer to be used: the planner does not offer it, the validator warns "
        "on every use; it still runs (set in its file or by its provider).",
    )
    replacement = models.CharField(
        max_length=64, blank=True, default="", help_text="A deprecated tool's successor."
    )
    refreshed_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="When `loadtools` (or the built-in sync) last read its definition, changed "
        "or not.",
    )
    available = models.BooleanField(
        default=True,
        help_text="False while its source (an MCP server, an OpenAPI document) could not be "
        "read at its last refresh: the tool is kept, and the planner does not offer it.",
    )
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

    @property
    def origin(self) -> str:
        """Where it came from, for people: ``file x.yaml``, ``MCP server time (x.yaml)``,
        ``built-in tools.builtin.data.DataProvider``."""
        if self.kind == ToolKind.BUILTIN:
            return f"built-in {self.source}" if self.source else "built-in"
        if self.kind == ToolKind.MCP:
            server = ((self.spec or {}).get("mcp") or {}).get("server") or {}
            where = f" ({self.source})" if self.source else ""
            return f"MCP server {server.get('name', '?')}{where}"
        return f"file {self.source}" if self.source else "-"


class ToolSourceKind(models.TextChoices):
    MCP = "mcp", "MCP server"
    OPENAPI = "openapi", "OpenAPI document"


class ToolSource(models.Model):
    """Where a set of tools is read from, re-read on a schedule (``tools/sources.py``):
    an MCP server file, or an OpenAPI document with the import's choices.

    Recorded by ``loadtools`` (an MCP server file it loaded), ``importopenapi`` and the
    admin's OpenAPI import; refreshed by beat every ``refresh_hours`` and on demand
    (``refreshsources``, the admin). Stale once not read for ``FLOWPILOT_SOURCE_STALE_HOURS``.
    """

    kind = models.CharField(max_length=16, choices=ToolSourceKind.choices)
    location = models.CharField(
        max_length=1000,
        unique=True,
        help_text="The MCP server file, or the OpenAPI document's file or URL.",
    )
    name = models.CharField(
        max_length=100, help_text="The MCP server's name, or the OpenAPI import's prefix."
    )
    options = models.JSONField(
        default=dict,
        blank=True,
        help_text="How an OpenAPI document is imported again: {out_dir, prefix, tags, "
        "operations, path_prefixes, strict}.",
    )
    refresh_hours = models.FloatField(
        null=True,
        blank=True,
        help_text="Re-read every this many hours; empty: FLOWPILOT_SOURCE_REFRESH_HOURS.",
    )
    refreshed_at = models.DateTimeField(
        null=True, blank=True, help_text="When it was last read successfully."
    )
    attempted_at = models.DateTimeField(
        null=True, blank=True, help_text="When a refresh was last tried."
    )
    error = models.TextField(blank=True, help_text="Why the last refresh failed ('' if it worked).")
    available = models.BooleanField(
        default=True, help_text="False while the last refresh could not read it."
    )
    reported_name = models.CharField(
        max_length=200,
        blank=True,
        help_text="What the source calls itself: the MCP server's name, the document's title.",
    )
    reported_version = models.CharField(
        max_length=100,
        blank=True,
        help_text="The source's own version: the MCP handshake's, the document's info.version.",
    )
    tools = models.JSONField(
        default=list, blank=True, help_text="The tools its last successful read found."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["kind", "name", "location"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(kind__in=["mcp", "openapi"]), name="toolsource_kind_valid"
            )
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} {self.name} ({self.location})"


class BreakerStateChoice(models.TextChoices):
    CLOSED = "closed", "Closed"
    OPEN = "open", "Open"
    HALF_OPEN = "half_open", "Half-open (one trial call)"


class Breaker(models.Model):
    """The circuit breaker of one external host, when no Redis broker holds it.

    A row exists only while the breaker has something to say (failures counted, open,
    half-open); a success deletes it. Written only by ``tools.breaker.db_store`` with
    conditional UPDATEs, so every worker sharing the database sees one state.
    """

    host = models.CharField(max_length=300, unique=True, help_text="host:port of the API.")
    state = models.CharField(
        max_length=16, choices=BreakerStateChoice.choices, default=BreakerStateChoice.CLOSED
    )
    failures = models.PositiveIntegerField(
        default=0, help_text="Consecutive retryable failures counted."
    )
    last_failure_at = models.DateTimeField(null=True, blank=True)
    opened_at = models.DateTimeField(null=True, blank=True)
    retry_at = models.DateTimeField(
        null=True, blank=True, help_text="When an open breaker lets one trial call through."
    )
    trial_until = models.DateTimeField(
        null=True, blank=True, help_text="Half-open: the trial call's slot lasts until then."
    )

    class Meta:
        ordering = ["host"]
        verbose_name = "circuit breaker"
        permissions = [("reset_breaker", "Can reset circuit breakers")]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(state__in=["closed", "open", "half_open"]),
                name="breaker_state_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.host} ({self.state})"


class ToolRevision(models.Model):
    """One definition a tool has had: a row per change, with its hash.

    Written when a tool row is created or changed (``loadtools``, the built-in sync,
    an MCP refresh) and when a workflow version pins the tool at approval, so every
    hash a version was approved with can be compared with what the tool is now.
    """

    tool_name = models.CharField(max_length=64, db_index=True)
    kind = models.CharField(max_length=16, choices=ToolKind.choices)
    hash = models.CharField(max_length=64, help_text="sha256 of the canonical stored spec.")
    spec = models.JSONField(help_text="The definition (templates only, no secrets).")
    source = models.CharField(max_length=500, blank=True)
    number = models.PositiveIntegerField(
        default=1, help_text="1 for the tool's first definition, then one more per change."
    )
    version = models.CharField(
        max_length=32,
        default="1.0.0",
        help_text="Semantic version, computed from what changed (tools/versions.py): major "
        "for a breaking change, minor for a compatible one, patch for the rest.",
    )
    bump = models.CharField(
        max_length=8,
        blank=True,
        help_text="major, minor or patch: the biggest change since the version before "
        "(empty for the first).",
    )
    changes = models.JSONField(
        default=list,
        blank=True,
        help_text="What changed since the version before: [{path, what, level}].",
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["tool_name", "-created_at", "-id"]
        indexes = [models.Index(fields=["tool_name", "hash"], name="toolrevision_name_hash")]
        constraints = [
            models.UniqueConstraint(
                fields=["tool_name", "number"], name="toolrevision_name_number_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tool_name} {self.version}"


class CredentialType(models.TextChoices):
    API_KEY = "api_key", "API key (header or query parameter)"
    BEARER = "bearer", "Bearer token"
    BASIC = "basic", "HTTP basic (username and password)"
    OAUTH2_CLIENT_CREDENTIALS = "oauth2_client_credentials", "OAuth2 client credentials"
    OAUTH2_AUTHORIZATION_CODE = "oauth2_authorization_code", "OAuth2 authorization code"
    HEADER = "header", "Custom header"
    QUERY = "query", "Custom query parameter"


class CredentialLocation(models.TextChoices):
    HEADER = "header", "Header"
    QUERY = "query", "Query parameter"


class CredentialSource(models.TextChoices):
    DATABASE = "database", "Database (encrypted)"
    VAULT = "vault", "HashiCorp Vault (KV v2)"


class Credential(models.Model):
    """A named credential a tool references (``auth: {credential: <name>}``).

    The fields that say how it is sent (a header name, a username, a client id, a token
    URL, scopes) are stored in clear; the secret values are one Fernet token in
    ``secrets`` (a JSON object, encrypted with ``FLOWPILOT_CREDENTIAL_KEYS``), and
    ``secret_fields`` names which of them are set. Written and read only through
    ``tools.credentials`` (docs/credentials.md).
    """

    name = models.CharField(
        max_length=64,
        unique=True,
        help_text="How tools name it: lower-case letters, digits, `_` and `-` (e.g. github_app).",
    )
    type = models.CharField(max_length=32, choices=CredentialType.choices)
    description = models.TextField(blank=True, help_text="What it is for, for people.")
    location = models.CharField(
        max_length=8,
        choices=CredentialLocation.choices,
        blank=True,
        help_text="api_key: sent as a header or as a query parameter.",
    )
    key_name = models.CharField(
        max_length=200,
        blank=True,
        help_text="api_key, header, query: the header or query parameter name.",
    )
    username = models.CharField(max_length=200, blank=True, help_text="basic: the user name.")
    client_id = models.CharField(max_length=300, blank=True, help_text="oauth2: the client id.")
    token_url = models.CharField(
        max_length=500, blank=True, help_text="oauth2: the token endpoint (http or https URL)."
    )
    authorize_url = models.CharField(
        max_length=500,
        blank=True,
        help_text="oauth2_authorization_code: the provider's consent page URL.",
    )
    scopes = models.CharField(
        max_length=1000, blank=True, help_text="oauth2: the scopes asked for, space-separated."
    )
    revocation_url = models.CharField(
        max_length=500,
        blank=True,
        help_text="oauth2_authorization_code: the provider's token revocation endpoint "
        "(RFC 7009), called on Disconnect; optional.",
    )
    secrets = models.TextField(
        blank=True, help_text="The secret values: a Fernet token (ciphertext only)."
    )
    source = models.CharField(
        max_length=8,
        choices=CredentialSource.choices,
        default=CredentialSource.DATABASE,
        help_text="Where the secret value is: encrypted here, or in HashiCorp Vault.",
    )
    vault_mount = models.CharField(
        max_length=200, blank=True, help_text="vault: the KV version 2 mount (e.g. secret)."
    )
    vault_path = models.CharField(
        max_length=500, blank=True, help_text="vault: the secret's path under the mount."
    )
    vault_key = models.CharField(
        max_length=200,
        blank=True,
        help_text="vault: the key of the secret holding the value (empty: the value's name, "
        "e.g. token).",
    )
    secret_fields = models.JSONField(
        default=list, blank=True, help_text="Which secret values are set (names, no values)."
    )
    last_used_at = models.DateTimeField(
        null=True, blank=True, help_text="When a tool call last read it (to the minute)."
    )
    expires_at = models.DateTimeField(
        null=True, blank=True, help_text="When its value stops working, if known."
    )
    needs_reconnect = models.BooleanField(
        default=False, help_text="Its value no longer works: a person must set or connect it."
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(name__regex=CREDENTIAL_NAME_PATTERN),
                name="credential_name_valid",
            ),
            models.CheckConstraint(
                condition=models.Q(type__in=[c.value for c in CredentialType]),
                name="credential_type_valid",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.type})"


class RateLimitSlot(models.Model):
    """The pacing of one rate-limit key (``tools.ratelimit``), when no Redis broker holds it.

    ``tat_ms`` is the key's theoretical arrival time (GCRA: the next free slot, plus the
    burst tolerance); ``paused_until_ms`` a pause the API's own rate headers asked for.
    Written only by ``tools.ratelimit.db_store`` with conditional UPDATEs (compare and
    set), so every worker sharing the database reserves a slot of its own.
    """

    key = models.CharField(max_length=300, unique=True, help_text="What shares the quota.")
    tat_ms = models.BigIntegerField(default=0, help_text="Next slot, Unix milliseconds.")
    paused_until_ms = models.BigIntegerField(
        null=True, blank=True, help_text="Paused by the API's headers until (Unix ms)."
    )

    class Meta:
        ordering = ["key"]
        verbose_name = "rate limit slot"

    def __str__(self) -> str:
        return self.key
