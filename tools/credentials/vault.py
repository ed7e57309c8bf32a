"""Credential values kept in HashiCorp Vault (KV version 2), read with ``hvac``.

A credential whose ``source`` is ``vault`` stores in the database only where its value
is: a KV v2 mount, a path and the key of that secret holding the value. The value is
read at call time and kept in the process for ``FLOWPILOT_VAULT_CACHE_SECONDS`` (60 by
default), so a value changed in Vault is what calls send within that time, in every
worker, with no restart and no re-approval.

Vault's address and token come from the settings (``FLOWPILOT_VAULT_ADDR``,
``FLOWPILOT_VAULT_TOKEN`` or ``FLOWPILOT_VAULT_TOKEN_FILE``, ``FLOWPILOT_VAULT_NAMESPACE``,
``FLOWPILOT_VAULT_TIMEOUT``). Every failure is a :class:`VaultError` naming the
credential and the Vault path, never a value: Vault unreachable (``unreachable``),
permission denied, no secret at the path, no such key. A read is one request, bounded
by the timeout; a failed read is not cached, so the next call tries again.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

DEFAULT_MOUNT = "secret"
"""The mount a Vault dev server enables KV v2 at, and the form's default."""


class VaultError(Exception):
    """A Vault value that cannot be had; ``message`` names the credential and the path.
    ``unreachable``: Vault did not answer (a later call may succeed)."""

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unreachable = unreachable


@dataclass(frozen=True)
class VaultSettings:
    """Where Vault is and how flowpilot logs in (the token is never in the repr)."""

    addr: str
    token: str = ""
    token_file: str = ""
    namespace: str = ""
    timeout: float = 5.0
    cache_seconds: float = 60.0

    def __repr__(self) -> str:
        return f"VaultSettings(addr={self.addr!r}, namespace={self.namespace!r})"

    @classmethod
    def from_settings(cls) -> VaultSettings:
        return cls(
            addr=str(getattr(settings, "FLOWPILOT_VAULT_ADDR", "") or "").rstrip("/"),
            token=str(getattr(settings, "FLOWPILOT_VAULT_TOKEN", "") or ""),
            token_file=str(getattr(settings, "FLOWPILOT_VAULT_TOKEN_FILE", "") or ""),
            namespace=str(getattr(settings, "FLOWPILOT_VAULT_NAMESPACE", "") or ""),
            timeout=float(getattr(settings, "FLOWPILOT_VAULT_TIMEOUT", 5.0)),
            cache_seconds=float(getattr(settings, "FLOWPILOT_VAULT_CACHE_SECONDS", 60.0)),
        )

    def login_token(self, where: str) -> str:
        """The token: ``FLOWPILOT_VAULT_TOKEN``, else the file's content (read each time,
        so a token renewed into the file is used without a restart)."""
        if self.token:
            return self.token
        if self.token_file:
            try:
                return Path(self.token_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise VaultError(
                    f"{where}: FLOWPILOT_VAULT_TOKEN_FILE {self.token_file!r} cannot be read "
                    f"({exc.strerror or type(exc).__name__})"
                ) from None
        raise VaultError(
            f"{where}: no Vault token is configured: set FLOWPILOT_VAULT_TOKEN or "
            "FLOWPILOT_VAULT_TOKEN_FILE (docs/credentials.md#vault)"
        )


@dataclass(frozen=True)
class VaultRef:
    """Where one credential's value is: ``mount``, ``path``, and the ``key`` of the
    secret at that path."""

    credential: str
    mount: str
    path: str
    key: str

    @property
    def where(self) -> str:
        """``mount/path#key``, as the admin and every error show it."""
        return f"{self.mount}/{self.path}#{self.key}"


class VaultCache:
    """The secrets read from Vault by this process, each kept until it is
    ``cache_seconds`` old (thread-safe); keyed by (address, namespace, mount, path)."""

    def __init__(self) -> None:
        self._entries: dict[tuple[str, str, str, str], tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str, str, str], now: float) -> dict[str, Any] | None:
        with self._lock:
            entry = self._entries.get(key)
        return entry[1] if entry is not None and entry[0] > now else None

    def put(self, key: tuple[str, str, str, str], data: dict[str, Any], until: float) -> None:
        with self._lock:
            self._entries[key] = (until, data)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


PROCESS_VAULT_CACHE = VaultCache()
"""This process's cache (as ``tools.http.oauth2.PROCESS_TOKENS`` is for OAuth2 tokens)."""


def read_value(
    ref: VaultRef,
    config: VaultSettings | None = None,
    *,
    cache: VaultCache | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> str:
    """The value of ``ref`` now: from ``cache`` when read less than ``cache_seconds``
    ago, else from Vault. A ``VaultError`` naming the credential and the path otherwise."""
    config = VaultSettings.from_settings() if config is None else config
    cache = PROCESS_VAULT_CACHE if cache is None else cache
    where = f"credential {ref.credential!r} (Vault {ref.mount}/{ref.path})"
    if not config.addr:
        raise VaultError(
            f"{where}: no Vault address is configured: set FLOWPILOT_VAULT_ADDR "
            "(docs/credentials.md#vault)"
        )
    key = (config.addr, config.namespace, ref.mount, ref.path)
    now = clock()
    data = cache.get(key, now)
    if data is None:
        data = _read(ref, config, where)
        if config.cache_seconds > 0:
            cache.put(key, data, now + config.cache_seconds)
    value = data.get(ref.key)
    if value is None:
        keys = ", ".join(sorted(map(str, data))) or "none"
        raise VaultError(f"{where}: the secret has no key {ref.key!r} (its keys: {keys})")
    if not isinstance(value, str) or not value:
        raise VaultError(f"{where}: key {ref.key!r} is not a non-empty string")
    return value


def _read(ref: VaultRef, config: VaultSettings, where: str) -> dict[str, Any]:
    import hvac  # imported when a Vault value is read: commands stay light
    import requests
    from hvac import exceptions

    client = hvac.Client(
        url=config.addr,
        token=config.login_token(where),
        namespace=config.namespace or None,
        timeout=config.timeout,
    )
    try:
        answer = client.secrets.kv.v2.read_secret_version(
            path=ref.path, mount_point=ref.mount, raise_on_deleted_version=True
        )
    except (exceptions.Forbidden, exceptions.Unauthorized):
        raise VaultError(
            f"{where}: permission denied (the token's policy does not allow reading it, "
            "or the token is not valid)"
        ) from None
    except exceptions.InvalidPath:
        raise VaultError(
            f"{where}: no secret at this path (or no KV v2 mount {ref.mount!r})"
        ) from None
    except (exceptions.VaultDown, exceptions.InternalServerError, exceptions.BadGateway):
        raise VaultError(f"{where}: Vault is sealed or failing", unreachable=True) from None
    except requests.Timeout:
        raise VaultError(
            f"{where}: Vault did not answer within {config.timeout:g} s", unreachable=True
        ) from None
    except requests.ConnectionError:
        raise VaultError(
            f"{where}: Vault at {config.addr} is unreachable", unreachable=True
        ) from None
    except exceptions.VaultError as exc:
        raise VaultError(f"{where}: Vault refused the read ({type(exc).__name__})") from None
    finally:
        client.adapter.close()
    data = (answer or {}).get("data", {}).get("data") if isinstance(answer, Mapping) else None
    if not isinstance(data, dict):
        raise VaultError(f"{where}: Vault's answer is not a KV version 2 secret")
    return data
