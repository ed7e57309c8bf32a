"""Keys for the credential tests: two real Fernet keys, the first configured."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

KEY_A = Fernet.generate_key().decode()
KEY_B = Fernet.generate_key().decode()


@pytest.fixture
def keys(settings):
    """``FLOWPILOT_CREDENTIAL_KEYS`` set to one key (KEY_A)."""
    settings.FLOWPILOT_CREDENTIAL_KEYS = [KEY_A]
    return settings


@pytest.fixture
def provider():
    """A loopback OAuth2 authorization server and API (tests/fakes/oauth_provider.py)."""
    from tests.fakes.oauth_provider import OAuthProvider

    found = OAuthProvider().start()
    yield found
    found.stop()


def consent_credential(provider, name="gh", **clear):
    """An oauth2_authorization_code credential registered with ``provider``."""
    from tools.credentials.store import save_credential
    from tools.models import Credential

    fields = {
        "client_id": provider.client_id,
        "token_url": f"{provider.url}/token",
        "authorize_url": f"{provider.url}/authorize",
        "scopes": "repo read:user",
        **clear,
    }
    row = Credential(name=name, type="oauth2_authorization_code", **fields)
    return save_credential(row, {"client_secret": provider.client_secret})
