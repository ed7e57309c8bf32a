"""The keys that encrypt stored credentials, and the one way values are sealed.

``FLOWPILOT_CREDENTIAL_KEYS`` holds Fernet keys (``cryptography``), comma-separated:
the first encrypts, every one decrypts (``MultiFernet``), so a new key is put first,
``rotatecredentialkeys`` re-encrypts every credential with it, and the old key can
then be removed (docs/credentials.md). A credential's secret values are one JSON
object sealed as one Fernet token (AES-128-CBC with HMAC-SHA256, so a changed byte
is refused, never decrypted into something else).
"""

from __future__ import annotations

import binascii
import json
from collections.abc import Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings

SETTING = "FLOWPILOT_CREDENTIAL_KEYS"


class CredentialKeyError(Exception):
    """No key, a malformed key, or a value no key decrypts; ``message`` says which."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def generate_key() -> str:
    """A new Fernet key (32 random bytes, URL-safe base64), as the setting holds it."""
    return Fernet.generate_key().decode("ascii")


def configured_keys() -> list[str]:
    """The keys of the setting, in order, blanks left out."""
    return [key.strip() for key in getattr(settings, SETTING, []) if key.strip()]


def fernets(keys: Sequence[str] | None = None) -> list[Fernet]:
    """One ``Fernet`` per key of ``keys`` (default: the setting), first first."""
    keys = configured_keys() if keys is None else list(keys)
    if not keys:
        raise CredentialKeyError(
            f"no credential key is configured: set {SETTING} to a Fernet key "
            "(`python -c 'from cryptography.fernet import Fernet; "
            "print(Fernet.generate_key().decode())'`; docs/credentials.md)"
        )
    found = []
    for number, key in enumerate(keys, start=1):
        try:
            found.append(Fernet(key))
        except (ValueError, binascii.Error):
            raise CredentialKeyError(
                f"{SETTING}: key {number} of {len(keys)} is not a Fernet key "
                "(32 bytes in URL-safe base64, 44 characters)"
            ) from None
    return found


def seal(values: dict[str, str], keys: Sequence[str] | None = None) -> str:
    """``values`` as one Fernet token, encrypted with the first key."""
    data = json.dumps(values, sort_keys=True, ensure_ascii=False).encode()
    return fernets(keys)[0].encrypt(data).decode("ascii")


def unseal(token: str, name: str, keys: Sequence[str] | None = None) -> dict[str, str]:
    """The values sealed in ``token`` (credential ``name``'s), with any key."""
    if not token:
        return {}
    try:
        data = MultiFernet(fernets(keys)).decrypt(token.encode("ascii"))
    except (InvalidToken, UnicodeEncodeError):
        raise CredentialKeyError(
            f"credential {name!r} cannot be decrypted with any key of {SETTING} "
            "(encrypted with a key since removed, or altered)"
        ) from None
    values = json.loads(data)
    return {str(k): str(v) for k, v in values.items()}


def reseal(token: str, name: str, keys: Sequence[str] | None = None) -> str | None:
    """``token`` encrypted again with the first key, or None when it already is."""
    found = fernets(keys)
    try:
        found[0].decrypt(token.encode("ascii"))
    except InvalidToken:
        pass
    else:
        return None
    try:
        return MultiFernet(found).rotate(token.encode("ascii")).decode("ascii")
    except InvalidToken:
        raise CredentialKeyError(
            f"credential {name!r} cannot be decrypted with any key of {SETTING} "
            "(encrypted with a key since removed, or altered)"
        ) from None
