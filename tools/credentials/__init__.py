"""Stored credentials: named, typed, their secret values encrypted at rest.

- :mod:`tools.credentials.kinds`: what each type holds (clear fields, secret fields);
- :mod:`tools.credentials.crypto`: the keys (``FLOWPILOT_CREDENTIAL_KEYS``) and Fernet;
- :mod:`tools.credentials.store`: saving values, reading one credential at call time,
  and the store as a :class:`tools.secrets.SecretSource`.

The row is :class:`tools.models.Credential`; docs/credentials.md is the guide.
"""
