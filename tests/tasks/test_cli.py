"""``htam tasks list`` through typer's CliRunner."""

import json

from typer.testing import CliRunner

from htam.cli import app

from .helpers import GOOD, write

runner = CliRunner()


def test_list_builtin_table():
    result = runner.invoke(app, ["tasks", "list"], env={"COLUMNS": "220"})
    assert result.exit_code == 0, result.output
    assert "29 tasks from builtin" in result.output
    assert "builtin/level1/14_Matmul" in result.output
    assert "f32[33x65], f32[65x47] -> f32[33x47]" in result.output
    assert "202K" in result.output  # small-size FLOPs of the matmul


def test_list_levels_as_json():
    result = runner.invoke(app, ["tasks", "list", "--levels", "2,3", "--json"])
    assert result.exit_code == 0, result.output
    # one labelled object, parsed whole: nothing else on stdout
    listing = json.loads(result.stdout)
    assert set(listing) == {"suite", "size", "count", "tasks", "errors", "flops_note"}
    assert listing["suite"] == "builtin" and listing["size"] == "small"
    assert listing["errors"] == []
    rows = listing["tasks"]
    assert listing["count"] == len(rows)
    assert all({"id", "name", "level", "digest", "path", "signature"} <= set(r) for r in rows)
    assert all(r["id"].startswith("builtin/level") for r in rows)  # ids whole, never cut
    assert len(rows) == 14 and {row["level"] for row in rows} == {2, 3}
    gemm = next(row for row in rows if row["name"] == "1_Gemm_Bias_ReLU")
    assert gemm["signature"]["ops"] == ["linear", "relu"]
    assert gemm["signature"]["flops"] == 2 * 33 * 65 * 47


def test_bad_files_are_reported_and_the_rest_listed(tmp_path):
    folder = tmp_path / "mixed"
    write(folder / "good.py", GOOD)
    write(folder / "broken.py", "def f(:\n")
    write(folder / "empty.py", "import torch\n")
    result = runner.invoke(app, ["tasks", "list", str(folder), "--json"])
    assert result.exit_code == 2  # a bad task file is a usage error, as README says
    listing = json.loads(result.stdout)
    assert [row["id"] for row in listing["tasks"]] == ["mixed/good"]
    assert len(listing["errors"]) == 2
    errors = [line for line in result.stderr.splitlines() if line.startswith("error")]
    assert len(errors) == 2
    assert any("broken.py: syntax error at line 1" in line for line in errors)
    assert any("empty.py: missing Model, get_inputs, get_init_inputs" in line for line in errors)


def test_missing_path_and_bad_levels(tmp_path):
    result = runner.invoke(app, ["tasks", "list", str(tmp_path / "nothing")])
    assert result.exit_code == 2
    assert "no such file or directory" in result.stderr
    result = runner.invoke(app, ["tasks", "list", "--levels", "one"])
    assert result.exit_code == 2


def test_list_gives_kind_and_configuration_counts(tmp_path):
    """Robust-KBench's layout: the timed configuration plus those checked for correctness."""
    from .robust_fixture import write_tree

    root = write_tree(tmp_path)
    result = runner.invoke(app, ["tasks", "list", str(root), "--json"])
    assert result.exit_code == 0, result.output
    got = {t["id"]: (t["kind"], t["configs"]) for t in json.loads(result.stdout)["tasks"]}
    # scale: the single one plus 2x2x2 multi combinations, one of which repeats the single one
    assert got["robust-kbench/scale"] == ("forward", 8)
    assert got["robust-kbench/scale_backward"] == ("backward", 8)
    # hinge: its single setting and the multi one (get_inputs' defaults)
    assert got["robust-kbench/hinge"] == ("forward", 2)
    table = runner.invoke(app, ["tasks", "list", str(root)], env={"COLUMNS": "220"})
    assert "configs" in table.stdout


def test_pipe_output_keeps_ids_whole_and_help_readable():
    """Off a terminal with no COLUMNS (a user's pipe): the table is as wide as its content, but
    the help text is not padded to that width (``htam bench --help | less``)."""
    table = runner.invoke(app, ["tasks", "list"], env={"COLUMNS": None})
    assert "builtin/level2/5_Elementwise_Chain" in table.output
    helptext = runner.invoke(app, ["bench", "--help"], env={"COLUMNS": None})
    assert helptext.exit_code == 0
    assert max(len(line) for line in helptext.output.splitlines()) <= 300


def test_a_long_listing_says_what_it_loads_on_stderr_only(tmp_path):
    """Each reference runs once as it is loaded (minutes over KernelBench): a listing of many
    tasks says so on stderr, and stdout stays one JSON object; a short one says nothing."""
    folder = tmp_path / "many"
    for i in range(21):
        write(folder / f"t{i:02d}.py", GOOD)
    result = runner.invoke(app, ["tasks", "list", str(folder), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["count"] == 21
    assert result.stderr.strip() == f"loading 21 tasks from {folder}"
    result = runner.invoke(app, ["tasks", "list", str(folder), "--json", "--pattern", "t0*"])
    assert json.loads(result.stdout)["count"] == 10 and result.stderr == ""


def test_load_suite_reports_each_file_before_loading_it(tmp_path):
    from htam.tasks import load_suite

    folder = tmp_path / "two"
    write(folder / "a.py", GOOD)
    write(folder / "b.py", GOOD)
    seen = []
    tasks = load_suite(folder, on_load=lambda *event: seen.append(event))
    assert [t.id for t in tasks] == ["two/a", "two/b"]
    assert seen == [(0, 2, "two/a"), (1, 2, "two/b")]
