"""Options that were silently ignored or wrote where they should not."""

import pytest
from typer.testing import CliRunner

from htam.cli import app

runner = CliRunner()


@pytest.mark.parametrize("command", [["optimize", "level1/1_ReLU"], ["bench", "builtin"]])
def test_model_alone_is_refused_not_ignored(command, tmp_path):
    result = runner.invoke(app, [*command, "--target", "cpu", "--model", "gpt-4o"])
    assert result.exit_code == 2
    assert "--model needs --llm PRESET or --base-url URL" in result.output


def test_out_must_be_new_empty_or_a_run(tmp_path):
    """--out into a folder of other files wrote run.json, steps/ and summary.json among them;
    --resume --out of a folder with no run silently started a new run."""
    folder = tmp_path / "cands"
    folder.mkdir()
    (folder / "mine.py").write_text("x = 1\n")
    args = ["optimize", "level1/1_ReLU", "--target", "cpu", "--steps", "1"]
    result = runner.invoke(app, [*args, "--out", str(folder)])
    assert result.exit_code == 2 and "not an empty folder or a run" in result.output
    assert sorted(p.name for p in folder.iterdir()) == ["mine.py"]
    missing = tmp_path / "nowhere"
    result = runner.invoke(app, [*args, "--out", str(missing), "--resume"])
    assert result.exit_code == 2 and "holds no run to continue" in result.output
    assert not missing.exists()
