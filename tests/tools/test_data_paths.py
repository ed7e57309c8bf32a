"""tools.data_paths: a tool reads only files inside its data directories or the output
directory; every way out (``..``, an absolute path elsewhere, a symlink) is refused."""

from __future__ import annotations

import pytest

from tools.data_paths import inside, resolve_read_path
from tools.errors import ToolCallFailed, ToolInputError


@pytest.fixture
def ctx(make_ctx, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "data" / "sales.csv").write_text("a,b\n", encoding="utf-8")
    (tmp_path / "out" / "report.md").write_text("# r\n", encoding="utf-8")
    (tmp_path / "secret.txt").write_text("no", encoding="utf-8")
    return make_ctx()


def test_a_relative_path_is_found_in_the_data_dir_then_the_output_dir(ctx, tmp_path):
    assert resolve_read_path("sales.csv", ctx) == (tmp_path / "data" / "sales.csv").resolve()
    assert resolve_read_path("report.md", ctx) == (tmp_path / "out" / "report.md").resolve()


def test_an_absolute_path_inside_a_root_is_allowed(ctx, tmp_path):
    path = str(tmp_path / "data" / "sales.csv")
    assert resolve_read_path(path, ctx) == (tmp_path / "data" / "sales.csv").resolve()


@pytest.mark.parametrize("raw", ["../secret.txt", "sub/../../secret.txt"])
def test_dot_dot_out_of_a_root_is_refused_even_when_the_file_exists(ctx, raw):
    with pytest.raises(ToolInputError, match="outside the allowed data directories"):
        resolve_read_path(raw, ctx)


def test_an_absolute_path_elsewhere_is_refused(ctx, tmp_path):
    with pytest.raises(ToolInputError, match="outside"):
        resolve_read_path(str(tmp_path / "secret.txt"), ctx)


def test_a_symlink_pointing_out_is_refused(ctx, tmp_path):
    (tmp_path / "data" / "link.txt").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(ToolInputError, match="outside"):
        resolve_read_path("link.txt", ctx)


def test_a_missing_file_inside_the_roots_is_a_failed_call_not_a_refusal(ctx):
    with pytest.raises(ToolCallFailed, match=r"file not found: 'nothing\.csv'"):
        resolve_read_path("nothing.csv", ctx)


def test_inside_is_by_path_components_not_by_prefix(tmp_path):
    assert inside(tmp_path / "data" / "x", tmp_path / "data")
    assert inside(tmp_path / "data", tmp_path / "data")
    assert not inside(tmp_path / "data2" / "x", tmp_path / "data")
