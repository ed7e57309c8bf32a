"""The ``./flowpilot`` set-up script at the repository root."""

import subprocess
import sys
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader

import pytest

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / "flowpilot"


@pytest.fixture(scope="module")
def script():
    """The script loaded as a module (it has no .py suffix), without running main()."""
    loader = SourceFileLoader("flowpilot_script", str(SCRIPT))
    module = module_from_spec(spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def _run(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=60
    )


def test_help_lists_the_commands_without_setting_anything_up():
    result = _run("--help")
    assert result.returncode == 0, result.stderr
    for command in ("demo", "test [ARGS...]", "manage ARGS...", "setup"):
        assert f"\n  {command}" in result.stdout
    assert "flowpilot: creating" not in result.stderr
    assert "installing" not in result.stderr


def test_unknown_command_exits_2_with_usage_on_stderr():
    result = _run("demo-please")
    assert result.returncode == 2
    assert "unknown command 'demo-please'" in result.stderr
    assert "usage: ./flowpilot" in result.stderr


def test_script_is_executable():
    assert SCRIPT.stat().st_mode & 0o111


@pytest.fixture
def venv(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    venv = tmp_path / ".venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    return venv


def test_install_is_missing_without_a_stamp(script, venv):
    assert not script.install_is_current(venv, venv.parent / "pyproject.toml")


def test_install_is_current_when_the_stamp_holds_the_pyproject_hash(script, venv):
    pyproject = venv.parent / "pyproject.toml"
    (venv / script.STAMP_NAME).write_text(script.pyproject_hash(pyproject) + "\n")
    assert script.install_is_current(venv, pyproject)


def test_install_is_stale_once_pyproject_changes(script, venv):
    pyproject = venv.parent / "pyproject.toml"
    (venv / script.STAMP_NAME).write_text(script.pyproject_hash(pyproject) + "\n")
    pyproject.write_text('[project]\nname = "x"\ndependencies = ["httpx"]\n')
    assert not script.install_is_current(venv, pyproject)


def test_install_is_missing_when_the_venv_has_no_python(script, venv):
    pyproject = venv.parent / "pyproject.toml"
    (venv / script.STAMP_NAME).write_text(script.pyproject_hash(pyproject) + "\n")
    (venv / "bin" / "python").unlink()
    assert not script.install_is_current(venv, pyproject)


def test_too_old_a_python_is_refused_with_the_version_needed(script):
    with pytest.raises(script.SetupError, match=r"needs Python 3\.11\+, but python3 here is 3\.9"):
        script.check_python((3, 9))
    script.check_python((3, 11))
