"""The process's hints of paused keys: re-read only when stale."""

from __future__ import annotations

from tools.ratelimit.hints import PauseHints


def test_read_once_per_refresh_and_added_to_at_once():
    reads: list[float] = []

    def read(now: float) -> dict[str, float]:
        reads.append(now)
        return {"host:a:443": 150.0, "host:b:443": 90.0}

    hints = PauseHints()
    assert hints.get(now=100.0, refresh=1.0, read=read) == {"host:a:443": 150.0}
    assert hints.get(now=100.5, refresh=1.0, read=read) == {"host:a:443": 150.0}
    assert reads == [100.0]  # within the refresh: no read
    hints.add("tool:x", 120.0)
    assert hints.get(now=100.6, refresh=1.0, read=read)["tool:x"] == 120.0
    hints.get(now=101.0, refresh=1.0, read=read)
    assert reads == [100.0, 101.0]
