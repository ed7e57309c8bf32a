import json
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from tools.builtin.data import DataToolsProvider
from tools.errors import ToolConfigError
from tools.models import Tool
from tools.services import tool_entries, tool_load_file, tools_load_dir, tools_set_enabled

DATA = Path(__file__).resolve().parent.parent / "data" / "tools"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "tools"

pytestmark = pytest.mark.django_db


@pytest.fixture
def tool_dir(tmp_path):
    directory = tmp_path / "tools"
    directory.mkdir()
    shutil.copy(DATA / "repo_new.yaml", directory / "repo.yaml")
    shutil.copy(DATA / "multi.yaml", directory / "multi.yml")
    (directory / "notes.txt").write_text("ignored")
    return directory


def _run(*args):
    out, err = StringIO(), StringIO()
    try:
        call_command(*args, stdout=out, stderr=err)
    except CommandError as exc:
        return out.getvalue(), err.getvalue(), exc
    return out.getvalue(), err.getvalue(), None


def test_tool_load_file_parses_only():
    assert tool_load_file(path=DATA / "repo_new.yaml")[0].name == "repo_info"
    assert Tool.objects.count() == 0
    with pytest.raises(ToolConfigError):
        tool_load_file(path=DATA / "bad" / "malformed.yaml")


def test_load_dir_creates_then_unchanged_then_updated(tool_dir):
    report = tools_load_dir(directory=tool_dir, sync_builtin=False)
    assert (report.created, report.updated, report.unchanged, report.ok) == (3, 0, 0, True)
    row = Tool.objects.get(name="repo_info")
    assert row.kind == "http"
    assert row.outputs == ["full_name", "stars"]
    assert row.source.endswith("repo.yaml")
    assert row.spec["http"]["auth"]["token"] == "{{env.API_TOKEN}}"
    again = tools_load_dir(directory=tool_dir, sync_builtin=False)
    assert (again.created, again.updated, again.unchanged) == (0, 0, 3)
    text = (tool_dir / "repo.yaml").read_text().replace("Repository facts", "Repo facts")
    (tool_dir / "repo.yaml").write_text(text)
    Tool.objects.filter(name="repo_info").update(enabled=False)
    third = tools_load_dir(directory=tool_dir, sync_builtin=False)
    assert (third.created, third.updated, third.unchanged) == (0, 1, 2)
    row.refresh_from_db()
    assert row.description == "Repo facts"
    assert row.enabled is False  # an operator's choice survives reloads


def test_secret_values_never_stored(tool_dir, monkeypatch):
    monkeypatch.setenv("API_TOKEN", "sk-should-never-be-stored")
    tools_load_dir(directory=tool_dir)
    dump = json.dumps(list(Tool.objects.values()), default=str)
    assert "sk-should-never-be-stored" not in dump


def test_one_bad_file_does_not_stop_the_others(tool_dir):
    shutil.copy(DATA / "bad" / "bad_schema.yaml", tool_dir / "bad_schema.yaml")
    shutil.copy(DATA / "bad" / "malformed.yaml", tool_dir / "malformed.yaml")
    report = tools_load_dir(directory=tool_dir, sync_builtin=False)
    assert report.created == 3
    assert [Path(e.source).name for e in report.errors] == ["bad_schema.yaml", "malformed.yaml"]
    assert not report.ok


def test_name_clashes_are_errors(tool_dir):
    (tool_dir / "zz_dup.yaml").write_text(
        "name: repo_info\nbase_url: https://x.org\nrequest: {url: /a}\n"
    )
    (tool_dir / "zz_builtin.yaml").write_text(
        "name: csv_read\nbase_url: https://x.org\nrequest: {url: /a}\n"
    )
    report = tools_load_dir(directory=tool_dir, providers=[DataToolsProvider()])
    messages = "\n".join(e.message for e in report.errors)
    assert "'repo_info' is already defined by" in messages
    assert "'csv_read' is already defined by a built-in provider" in messages
    assert Tool.objects.get(name="csv_read").kind == "builtin"


def test_builtin_sync_and_missing_dir(tmp_path):
    report = tools_load_dir(directory=tmp_path / "nope")
    assert str(report.errors[0]) == f"{tmp_path / 'nope'}: no such file or directory"
    assert Tool.objects.filter(kind="builtin").count() == len(DataToolsProvider().tools)
    assert Tool.objects.get(name="csv_read").source == "tools.builtin.data.DataToolsProvider"


def test_single_file_path(tool_dir):
    report = tools_load_dir(directory=tool_dir / "repo.yaml", sync_builtin=False)
    assert [t.name for t in report.tools] == ["repo_info"]


def test_set_enabled_and_entries(tool_dir):
    tools_load_dir(directory=tool_dir)
    changed = tools_set_enabled(tools=Tool.objects.filter(kind="http"), enabled=False)
    assert changed == 3
    assert tools_set_enabled(tools=Tool.objects.filter(kind="http"), enabled=False) == 0
    entries = {e.name: e for e in tool_entries()}
    assert entries["repo_info"].enabled is False
    assert entries["repo_info"].inputs == ["owner*", "repo*", "per_page"]
    assert entries["csv_read"].kind == "builtin"


def test_entries_include_unsynced_builtins_and_skip_corrupt_rows():
    Tool.objects.create(name="corrupt", kind="http", spec={"nope": 1})
    names = [e.name for e in tool_entries()]
    assert "corrupt" not in names
    assert "aggregate" in names
    assert names == sorted(names)


def test_loadtools_command_output_and_exit_code(tool_dir):
    out, err, exc = _run("loadtools", str(tool_dir))
    assert exc is None, err
    assert "created repo_info (http)" in out
    assert "created first_tool (http)" in out
    assert "created csv_read (builtin)" in out
    assert f"{tool_dir}: 8 created, 0 updated, 0 unchanged, 0 error(s)" in out
    out, _err, exc = _run("loadtools", str(tool_dir), "--no-builtin")
    assert exc is None
    assert "unchanged repo_info (http)" in out
    assert "csv_read" not in out


def test_loadtools_reports_every_error_and_exits_1(tool_dir):
    bad = tool_dir.parent / "bad"
    shutil.copytree(DATA / "bad", bad)
    out, err, exc = _run("loadtools", str(bad), str(tool_dir))
    assert isinstance(exc, CommandError)
    assert exc.returncode == 1
    assert "3 file(s) could not be loaded" in str(exc)
    assert "malformed.yaml:5: malformed YAML" in err
    assert "bad_schema.yaml:8: tool 'bad_schema': field inputs.properties.owner.type" in err
    assert "bad_fields.yaml:7: tool 'bad.name': field auth:" in err
    assert "created repo_info (http)" in out  # the good directory still loaded


def test_loadtools_examples():
    out, err, exc = _run("loadtools", str(EXAMPLES))
    assert exc is None, err
    assert "created exchange_rate (http)" in out
    assert Tool.objects.filter(kind="http").count() >= 11


def test_listtools_table_and_json(tool_dir):
    _run("loadtools", str(tool_dir))
    Tool.objects.filter(name="first_tool").update(enabled=False)
    out, _, _ = _run("listtools")
    lines = out.splitlines()
    assert lines[0].split() == [
        "NAME", "KIND", "VERSION", "INPUTS", "OUTPUTS", "ORIGIN", "REFRESHED", "DESCRIPTION",
    ]  # fmt: skip
    repo = next(line for line in lines if line.startswith("repo_info"))
    assert "owner*, repo*, per_page" in repo
    assert "full_name, stars" in repo
    assert "Repository facts" in repo
    assert any(line.startswith("first_tool (disabled)") for line in lines)
    out, _, _ = _run("listtools", "--json")
    data = json.loads(out)
    assert {"name", "kind", "description", "inputs", "outputs", "enabled"} <= set(data[0])
    assert "csv_read" in [d["name"] for d in data]


def test_listtools_empty(settings):
    settings.FLOWPILOT_BUILTIN_PROVIDERS = []
    out, _, _ = _run("listtools")
    assert "No tools" in out
