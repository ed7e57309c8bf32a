"""``rotatecredentialkeys [--generate-key]`` — encrypt every stored credential with the
first key of ``FLOWPILOT_CREDENTIAL_KEYS`` (docs/credentials.md, "Rotating keys").
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser
from django.db import transaction

from tools.commands import FlowpilotCommand
from tools.credentials.crypto import CredentialKeyError, generate_key
from tools.credentials.store import rotate_keys


class Command(FlowpilotCommand):
    help = (
        "Encrypt every stored credential again with the first key of "
        "FLOWPILOT_CREDENTIAL_KEYS (the others still decrypt); running it again changes "
        "nothing. --generate-key prints a new key instead."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--generate-key",
            action="store_true",
            help="Print a new Fernet key to put first in FLOWPILOT_CREDENTIAL_KEYS, and exit.",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["generate_key"]:
            self.stdout.write(generate_key())
            return
        try:
            with transaction.atomic():
                rotated, current = rotate_keys()
        except CredentialKeyError as exc:
            raise CommandError(f"{exc.message}; no credential was changed") from exc
        self.stdout.write(
            f"re-encrypted {rotated} credential(s) with the first key; {current} already used it"
        )
