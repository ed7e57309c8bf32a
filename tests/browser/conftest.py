"""A real browser for the admin review flow: Playwright driving Debian's chromium.

No ``playwright install``: the browser is the system's ``/usr/bin/chromium``
(``apt-get install -y chromium``), or ``FLOWPILOT_CHROMIUM``. Without it the
browser tests skip with the reason, except under ``CI=true``, where a missing
browser is a failure.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = Path(os.environ.get("FLOWPILOT_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = Path(__file__).resolve().parents[2] / "out" / "browser"


def _ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def _unavailable(reason: str) -> None:
    if _ci():
        pytest.fail(f"{reason}; CI=true needs the browser tests to run", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def playwright_api():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("playwright is not installed (pip install -e '.[dev]')")
    if not CHROMIUM.exists():
        _unavailable(f"no chromium at {CHROMIUM} (apt-get install -y chromium)")
    # Playwright's sync API keeps an event loop running in this thread; Django's
    # ORM calls made here (fixtures, asserts, flushing the database) stay synchronous.
    previous = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as api:
            yield api
    finally:
        if previous is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = previous


@pytest.fixture(scope="module")
def browser(playwright_api):
    browser = playwright_api.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
    )
    yield browser
    browser.close()


@pytest.fixture
def page(browser):
    """A fresh browser context and page; its console errors fail the test."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []

    def on_console(message) -> None:
        # Chromium asks every site for /favicon.ico; the admin has none.
        if message.type == "error" and not message.location.get("url", "").endswith("favicon.ico"):
            errors.append(f"{message.text} ({message.location.get('url')})")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    context.close()
    assert errors == [], f"the browser reported errors: {errors}"


@pytest.fixture
def artifacts() -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS
