"""Memory and bench options: Ray's options without --ray were ignored; `memory show` and
`memory plot` refused the JSON exports that `memory merge` takes; a bench named its proposer
by its internal key."""

import pytest
from typer.testing import CliRunner

from htam.bench import ProposerSpec
from htam.cli import app

runner = CliRunner()


def test_rays_options_without_ray_are_refused():
    for extra, name in (
        (["--ray-slots", "2"], "--ray-slots"),
        (["--ray-address", "auto"], "--ray-address"),
    ):
        result = runner.invoke(app, ["bench", "builtin", "--tasks", "1_ReLU", *extra])
        assert result.exit_code == 2, result.output
        assert f"{name} needs --ray" in result.output


def test_show_and_plot_take_a_json_export(tmp_path):
    bank, export, image = tmp_path / "b.db", tmp_path / "e.json", tmp_path / "g.png"
    assert runner.invoke(app, ["memory", "init", str(bank)]).exit_code == 0
    assert runner.invoke(app, ["memory", "export", str(bank), str(export)]).exit_code == 0
    shown = runner.invoke(app, ["memory", "show", str(export)])
    assert shown.exit_code == 0 and "Directions" in shown.output
    assert (
        runner.invoke(app, ["memory", "show", str(bank)]).output.split("\n", 1)[1]
        == (shown.output.split("\n", 1)[1])
    )
    plotted = runner.invoke(app, ["memory", "plot", str(export), str(image)])
    assert plotted.exit_code == 0 and image.stat().st_size > 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": 1}')
    refused = runner.invoke(app, ["memory", "show", str(bad)])
    assert refused.exit_code == 2 and "not an HTAM memory export" in refused.output


def test_a_proposer_is_named_in_words():
    assert ProposerSpec().label() == "offline templates"
    assert ProposerSpec(llm="deepseek").label() == "LLM deepseek, model the preset's"
    # a custom endpoint has no preset: its label does not claim one
    assert ProposerSpec(base_url="http://h:1/v1").label() == "LLM http://h:1/v1, model none given"
    assert ProposerSpec(base_url="http://h:1/v1", model="m").label() == "LLM http://h:1/v1, model m"


def test_a_narrow_terminal_folds_a_table_and_cuts_nothing():
    import io

    from rich.table import Table

    from htam.cli.console import _Console

    table = Table(title="tasks")
    for name in ("id", "families", "shapes (in -> out)", "configs"):
        table.add_column(name)
    row = ["builtin/level1/19_ReLU_with_a_long_name", "elementwise", "f32[33x257]", "2"]
    table.add_row(*row)
    out = io.StringIO()
    _Console(file=out, width=40).print(table)
    lines = out.getvalue().splitlines()
    assert max(map(len, lines)) <= 40 and "…" not in out.getvalue()
    body = [line.split("│")[1:-1] for line in lines if line.startswith("│")]
    assert ["".join(cells[k].strip() for cells in body) for k in range(4)] == row


def test_check_types_its_eval_settings(tmp_path):
    """Newcomer round 5: ``--eval timing_budget_ms=abc`` reached the reference's process and
    failed the task with a TypeError."""
    out = tmp_path / "check"
    for item, said in (
        ("timing_budget_ms=abc", "valid number"),
        ("min_timed=2.5", "valid integer"),
        ("allow_torch=maybe", "valid boolean"),
        ("trials=0", "at least 1"),
        ("memory_limit_mb=1", "at least 256"),
    ):
        args = ["tasks", "check", "builtin", "--tasks", "1_ReLU", "--target", "cpu"]
        result = runner.invoke(app, [*args, "--eval", item, "--out", str(out)])
        assert result.exit_code == 2, result.output
        assert f"--eval {item.split('=')[0]}=" in result.output and said in result.output
        assert not out.exists()


@pytest.mark.slow
def test_a_solution_reading_a_file_beside_it_is_told_why_it_failed(tmp_path):
    """Newcomer round 5: ``load(sources=[<dir of __file__>/relu.cpp])`` failed with a traceback
    about /tmp/job/relu.cpp: the job holds the solution file alone."""
    (tmp_path / "relu.cpp").write_text("// the kernel\n")
    solution = tmp_path / "sol.py"
    solution.write_text(
        "import os\nimport torch.nn as nn\nfrom torch.utils.cpp_extension import load\n\n"
        'ext = load(name="sib", sources=[os.path.join(os.path.dirname(__file__), "relu.cpp")])\n'
        "\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n        return ext.relu(x)\n"
    )
    args = ["eval", "level1/1_ReLU", str(solution), "--target", "cpu", "--language", "cpp"]
    result = runner.invoke(app, [*args, "--quiet"])
    assert result.exit_code == 1, result.output
    assert result.output.startswith("compile_error: the solution reads relu.cpp, a file beside it")


def test_memory_commands_refuse_a_missing_folder_in_one_line(tmp_path):
    """Newcomer round 8: init, export, import and merge gave a traceback for an output in a
    folder that does not exist, and plot made the folder."""
    bank, export = tmp_path / "b.db", tmp_path / "e.json"
    assert runner.invoke(app, ["memory", "init", str(bank)]).exit_code == 0
    assert runner.invoke(app, ["memory", "export", str(bank), str(export)]).exit_code == 0
    nowhere = tmp_path / "no" / "such"
    for args in (
        ["init", str(nowhere / "x.db")],
        ["export", str(bank), str(nowhere / "x.json")],
        ["import", str(export), str(nowhere / "x.db")],
        ["merge", str(bank), str(export), str(nowhere / "x.db")],
        ["plot", str(bank), str(nowhere / "x.png")],
    ):
        result = runner.invoke(app, ["memory", *args])
        assert result.exit_code == 2, (args, result.output)
        assert f"its folder {nowhere} does not exist" in result.output
    assert not (tmp_path / "no").exists()


def test_bench_refuses_a_memory_that_is_no_bank_before_writing(tmp_path):
    """Newcomer round 8: a traceback, and an --out that could be neither resumed nor reused."""
    not_a_bank, out = tmp_path / "a.json", tmp_path / "out"
    not_a_bank.write_text("{}")
    args = ["bench", "builtin", "--tasks", "1_ReLU", "--target", "cpu", "--out", str(out)]
    result = runner.invoke(app, [*args, "--memory-mode", "accumulate", "--memory", str(not_a_bank)])
    assert result.exit_code == 2 and "not a memory bank" in result.output
    missing = runner.invoke(app, [*args, "--memory", str(tmp_path / "none.db")])
    assert missing.exit_code == 2 and "no such memory bank" in missing.output
    assert not out.exists()
