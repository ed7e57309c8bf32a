"""``tools.llm`` names its parts without loading them: each loads on first use."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import tools.llm

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", tools.llm.__all__)
def test_every_public_name_is_its_home_modules_object(name: str):
    home = importlib.import_module(tools.llm._HOMES[name])
    assert getattr(tools.llm, name) is getattr(home, name)


def test_the_homes_are_exactly_the_public_names():
    assert sorted(tools.llm._HOMES) == sorted(tools.llm.__all__)


def test_an_unknown_name_is_an_attribute_error_naming_it():
    with pytest.raises(AttributeError, match="no attribute 'LLMClients'"):
        _ = tools.llm.LLMClients


def test_reading_the_endpoints_does_not_load_the_client():
    """What the settings import at every start: the endpoints, not the client."""
    probe = (
        "import sys, tools.llm.endpoints; "
        "print(sorted(m for m in ('tools.llm.client', 'pydantic', 'httpx') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    assert done.stdout.strip() == "[]"
