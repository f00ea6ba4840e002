"""Sizes and task listings: a bad --size leaves nothing behind, `tasks list` exits 2 on a bad
task file and shows "-" for FLOPs the counter cannot see, languages are listed as words, and
the byte counts one line compares share one unit."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from htam.cli import app
from htam.cli.fmt import fmt_bytes, fmt_bytes_alike

from .tasks_src import relu_task

runner = CliRunner()


def _lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def test_a_bad_size_is_one_usage_line_and_creates_no_run_directory(tmp_path, env):
    args = ["optimize", "level2/5_Elementwise_Chain", "--target", "cpu", "--size", "huge"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout == ""
    assert _lines(result.stderr) == ["error: --size huge: unknown size; choose small or large"]
    assert not (tmp_path / "runs").exists()
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 2 and json.loads(result.stdout)["exit_code"] == 2
    assert not (tmp_path / "runs").exists()


def test_a_language_the_target_does_not_run_is_named_in_words(tmp_path, env):
    args = ["optimize", "level1/1_ReLU", "--target", "cpu", "--language", "cuda"]
    result = runner.invoke(app, args, env=env)
    assert result.exit_code == 2
    assert _lines(result.stderr) == [
        "error: language 'cuda' does not run on target cpu; choose cpp or triton"
    ]


def test_tasks_list_with_a_bad_file_exits_2_and_shows_uncounted_flops_as_a_dash(tmp_path, env):
    folder = tmp_path / "suite"
    folder.mkdir()
    (folder / "relu.py").write_text(relu_task("8", "16"))
    gemm = relu_task("8", "16").replace("torch.relu(x)", "x @ x.T")
    (folder / "gemm.py").write_text(gemm)
    (folder / "bad.py").write_text("def broken(:\n")
    result = runner.invoke(app, ["tasks", "list", str(folder)], env=env)
    assert result.exit_code == 2, (result.output, result.exception)
    errors = _lines(result.stderr)
    assert len(errors) == 1 and errors[0].startswith("error: ") and "bad.py" in errors[0]
    rows = {line.split("│")[1].strip(): line.split("│") for line in result.stdout.splitlines()
            if line.startswith("│")}  # fmt: skip
    assert rows["suite/relu"][4].strip() == "-"  # elementwise: the counter counts no FLOP
    assert rows["suite/gemm"][4].strip() == "2.05K"  # 2 x 8 x 16 x 8
    assert "matmul, conv and attention only" in result.stdout
    result = runner.invoke(app, ["tasks", "list", str(folder), "--json"], env=env)
    assert result.exit_code == 2
    listing = json.loads(result.stdout)  # one object still, the bad file in it
    counted = {t["name"]: t["flops_counted"] for t in listing["tasks"]}
    assert counted == {"gemm": True, "relu": False}
    assert len(listing["errors"]) == 1
    # a bad file alone: its error line, and no empty table of "0 tasks" on stdout before it
    result = runner.invoke(app, ["tasks", "list", str(folder / "bad.py")], env=env)
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.stdout == "" and len(_lines(result.stderr)) == 1


def test_byte_counts_compared_in_one_line_share_one_unit():
    assert fmt_bytes(268_435_456) == "268 MB" and fmt_bytes(67_800) == "67.8 KB"
    assert fmt_bytes_alike(1_073_741_824, 268_435_456) == ["1.07 GB", "0.27 GB"]
    assert fmt_bytes_alike(12_900_000_000, 12_880_000_000) == ["12.90 GB", "12.88 GB"]
    assert fmt_bytes_alike(1_073_741_824, 2_050) == ["1.07 GB", "2.05 KB"]  # 0.00 GB says nothing
