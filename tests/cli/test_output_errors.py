"""An output HTAM cannot write (a read-only filesystem, a folder it may not write into) is one
line and exit 2 in every command, as any other bad path is: never a traceback."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from htam.cli import app

runner = CliRunner()
READ_ONLY = "/sys"  # no one may create files there, root included


def _one_line(result, *words: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert all(w in lines[0] for w in words), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def bank(tmp_path_factory):
    path = tmp_path_factory.mktemp("bank") / "bank.db"
    assert runner.invoke(app, ["memory", "init", str(path)]).exit_code == 0
    return path


def test_memory_plot_to_a_read_only_path(bank):
    out = f"{READ_ONLY}/graph.png"
    _one_line(runner.invoke(app, ["memory", "plot", str(bank), out]), out, "cannot write it")


def test_memory_init_on_a_read_only_path():
    out = f"{READ_ONLY}/bank.db"
    line = _one_line(runner.invoke(app, ["memory", "init", out]), out, "cannot create it")
    assert ".building" not in line  # the path given, not a temporary one beside it


def test_report_into_a_read_only_bench_directory(tmp_path, monkeypatch):
    import htam.bench

    def read_only(out, title=None):
        raise PermissionError(13, "Permission denied", str(out / "metrics.json"))

    monkeypatch.setattr(htam.bench, "write_report", read_only)
    line = _one_line(runner.invoke(app, ["report", str(tmp_path)]), "cannot write the report")
    assert str(tmp_path / "metrics.json") in line and "Permission denied" in line


def test_any_other_os_error_on_a_path_is_one_line_too(tmp_path, monkeypatch):
    """The safety net every command has: an OSError naming a file, where no command said more."""
    from htam.cli import memory_cmd

    def fails(*args, **kwargs):
        raise OSError(30, "Read-only file system", str(tmp_path / "x"))

    monkeypatch.setattr(memory_cmd, "default_memory", fails)
    _one_line(runner.invoke(app, ["memory", "path"]), str(tmp_path / "x"), "Read-only file system")
