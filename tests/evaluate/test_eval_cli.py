"""Bad solution files get one-line errors before any evaluator starts; `htam doctor` says what
the machine offers the evaluator."""

import json

import pytest
from typer.testing import CliRunner

from htam.cli import app

runner = CliRunner()


@pytest.mark.parametrize(
    "make, expected",
    [
        (lambda p: p.write_bytes(b"\xff\xfe not text"), "not UTF-8 text"),
        (lambda p: p.write_bytes(b"a" * (1 << 21)), "a solution may have at most 1048576"),
        (lambda p: p.mkdir(), "is a directory"),
        (lambda p: None, "no such solution file"),
    ],
    ids=["non-utf8", "oversize", "directory", "missing"],
)
def test_bad_solution_files_get_one_line_errors(tmp_path, make, expected):
    path = tmp_path / "solution.py"
    make(path)
    result = runner.invoke(app, ["eval", "level1/1_ReLU", str(path), "--target", "cpu"])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0], result.output
    assert "Traceback" not in result.output


def test_doctor_reports_each_protection():
    result = runner.invoke(app, ["doctor", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["isolation"].startswith("isolation: ")
    assert set(report["checks"]) >= {"an own user id per candidate", "no new sockets or keyrings (seccomp)"}
    # Missing protections are named, one line each; none is silently skipped.
    assert all(report["checks"].values()) == (report["missing"] == [])
    # the kernel's limits: named where they hold, their absence said where not
    assert (report["cgroup"] or "").startswith("cgroup v") or any(
        "no cgroup" in m for m in report["missing"]
    )
    assert report["job_directory"] or any("no sized job" in m for m in report["missing"])


@pytest.mark.slow  # torch.compile on the CPU: a minute or more
def test_compile_reference_on_the_cpu_gives_a_speedup_vs_torch_compile(tmp_path):
    """On the CPU torch.compile is off by default (it costs minutes once); asked for, the
    result carries the compiled reference's time and the speedup against it."""
    import json

    path = tmp_path / "relu.py"
    path.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
        "    def forward(self, x):\n        return torch.relu(x)\n"
    )
    args = ["eval", "level1/1_ReLU", str(path), "--target", "cpu", "--size", "small"]
    result = runner.invoke(app, [*args, "--allow-torch", "--compile-reference", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["status"] == "ok" and data["ref_compile_runtime_ms"] > 0
    assert data["speedup_vs_compile"] > 0


@pytest.mark.slow
def test_a_rejection_names_its_rule_in_the_table(tmp_path):
    """ "[rule]" is text, not rich markup (newcomer: the table swallowed it, leaving " line 0:")."""
    path = tmp_path / "solution.py"
    path.write_text("import torch\n\n\nclass Other:\n    pass\n")
    result = runner.invoke(app, ["eval", "level1/1_ReLU", str(path), "--target", "cpu"])
    assert "[no-model-new]: the solution defines no class ModelNew" in result.output, result.output
    assert "line 0" not in result.output


@pytest.mark.slow  # two evaluations; eval to a verdict stays fast (test_optimize_cli)
def test_quiet_prints_the_verdict_alone_on_one_line(tmp_path):
    """--quiet: one line a script can read, "ok · 1.2x vs eager · ..." or "incorrect: cause";
    with --json it is a usage error."""
    body = "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n    def forward(self, x):\n"
    good, bad = tmp_path / "relu.py", tmp_path / "zeros.py"
    good.write_text(body + "        return torch.relu(x)\n")
    bad.write_text(body + "        return torch.zeros_like(x)\n")
    args = ["level1/1_ReLU", "--target", "cpu", "--size", "small", "--allow-torch", "--quiet"]
    ok = runner.invoke(app, ["eval", args[0], str(good), *args[1:]])
    assert ok.exit_code == 0, ok.output
    lines = ok.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("ok · ") and "x vs eager" in lines[0], lines
    wrong = runner.invoke(app, ["eval", args[0], str(bad), *args[1:]])
    assert wrong.exit_code == 1
    lines = wrong.stdout.splitlines()
    assert len(lines) == 1 and lines[0].startswith("incorrect: "), lines
    both = runner.invoke(app, ["eval", args[0], str(good), *args[1:], "--json"])
    assert both.exit_code == 2 and "give one of them" in both.output
