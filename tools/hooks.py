"""Hooks: how a lower layer tells upper layers that something happened, without importing them.

The names are dotted paths in a setting (``config/settings.py`` wires them), each a
callable taking keyword arguments. They run once the current transaction commits, so
an upper layer never sees a state that is rolled back afterwards, and ``robust``: a
failing hook is logged and never fails the write that announced it (a run that
finished stays finished even if its failure email cannot be queued).

It sits in ``tools``, the lowest layer, so every announcer (``workflows`` when a
version is activated, ``runs`` when a run finishes) sees it without an upward import.
"""

from __future__ import annotations

from functools import partial, update_wrapper
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils.module_loading import import_string


def hooks_announce(*, setting: str, **kwargs: Any) -> None:
    """Call every hook named in ``settings.<setting>`` with ``kwargs`` after commit.

    Each call carries its hook's name (``update_wrapper``): Django logs a failing
    ``robust`` callback by its ``__qualname__``, which a bare ``partial`` lacks, so the
    log line itself would raise and stop the hooks after it.
    """
    for path in getattr(settings, setting, ()):
        hook = import_string(path)
        transaction.on_commit(update_wrapper(partial(hook, **kwargs), hook), robust=True)
