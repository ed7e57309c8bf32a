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
