"""httpbin (from PyPI) behind gunicorn on a free loopback port: a server nobody here wrote.

httpbin pins dependencies that conflict with the project's (playwright's greenlet), so
it lives in a virtualenv of its own, ``.venv-httpbin`` at the repository root
(gitignored), created on first use with ``python -m venv`` + ``pip install httpbin
gunicorn``. When it cannot be installed (offline), the tests using it are skipped —
or fail under ``CI=true``, where a skip would hide a broken check.
"""

from __future__ import annotations

import fcntl
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.startup import start_deadline

REPO_ROOT = Path(__file__).resolve().parents[2]
VENV = REPO_ROOT / ".venv-httpbin"
PACKAGES = ("httpbin", "gunicorn")


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"httpbin is needed under CI=true: {reason}")
    pytest.skip(f"httpbin unavailable: {reason}")


def _gunicorn() -> Path:
    return VENV / "bin" / "gunicorn"


def ensure_venv() -> Path | None:
    """The gunicorn of ``.venv-httpbin``, installing it when missing; None on failure."""
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(REPO_ROOT / ".venv-httpbin.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test processes never install at once
        if _gunicorn().exists():
            return _gunicorn()
        steps = [
            [sys.executable, "-m", "venv", str(VENV)],
            [str(VENV / "bin" / "python"), "-m", "pip", "install", "-q", *PACKAGES],
        ]
        for command in steps:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
            if done.returncode != 0:
                return None
    return _gunicorn() if _gunicorn().exists() else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def run_httpbin() -> Iterator[str]:
    """Start httpbin (4 threads, so a slow /drip never blocks the other tests)."""
    gunicorn = ensure_venv()
    if gunicorn is None:
        _unavailable(f"cannot create {VENV.name} with pip install {' '.join(PACKAGES)}")
    port = _free_port()
    process = subprocess.Popen(
        [str(gunicorn), "--bind", f"127.0.0.1:{port}", "--threads", "4",
         "--log-level", "warning", "httpbin:app"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stderr is not None:
            process.stderr.close()


def _wait_ready(url: str, process: subprocess.Popen) -> None:
    limit = start_deadline()
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if process.poll() is not None:
            _unavailable(f"gunicorn exited with {process.returncode}")
        try:
            if httpx.get(url + "/get", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    _unavailable(f"gunicorn did not answer within {limit:.0f} s")
