"""tools/shared_cache.py: a statement refused by SQLite's shared cache is tried again."""

from __future__ import annotations

import pytest
from django.db import OperationalError

from tools.shared_cache import shared_cache_retry


def test_shared_cache_retry_tries_a_locked_table_again_and_passes_other_errors():
    answers = [OperationalError("database table is locked: tools_credential")] * 2 + ["row"]

    def statement():
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert shared_cache_retry(statement) == "row"
    assert answers == []

    def broken():
        raise OperationalError("no such table: tools_credential")

    with pytest.raises(OperationalError, match="no such table"):
        shared_cache_retry(broken)
