"""The transfer experiment end to end on the CPU: offline proposer, Triton interpreter, one
source task, one Robust-KBench style target task, two steps, one seed."""

import json
import subprocess

import pytest

from htam.bench import BenchConfig, ProposerSpec
from htam.bench.metrics import discovery_curve
from htam.bench.results import load_rows
from htam.bench.transfer import ARMS, geomean_fail1, run_transfer
from htam.tasks import load_suite
from tests.bench.conftest import FAST_EVAL, cli_env, htam_cli
from tests.tasks.robust_fixture import write_tree


@pytest.fixture(scope="module")
def experiment(tmp_path_factory):
    root = tmp_path_factory.mktemp("transfer")
    source = load_suite("builtin", pattern="*5_Elementwise_Chain")
    target = load_suite(write_tree(root), pattern="scale")
    base = BenchConfig(out=root / "out", methods=["htam"], steps=2, target="cpu",
                       language="triton", devices=["cpu0"], proposer=ProposerSpec(),
                       eval_overrides=FAST_EVAL)  # fmt: skip
    phases: list[str] = []
    files = run_transfer(base, source, target, on_phase=phases.append)
    return root / "out", files, phases


@pytest.mark.slow
def test_four_benches_and_the_comparison(experiment):
    out, files, phases = experiment
    assert [p.split(":")[0] for p in phases] == ["build", *ARMS]
    data = json.loads(files.json.read_text())
    # two build steps on the chain: strategies tried, one edge (step 0 -> step 1) observed
    assert data["transferred_strategies"] >= 1 and data["transferred_edges"] >= 1
    row = data["tasks"]["robust-kbench/scale"]
    for arm in ARMS:
        assert data["arms"][arm]["steps"] == 2
        assert len(data["arms"][arm]["curve"]) == 2
        # the bench's rule (none correct yet: 1.0), not 0 beside a table that counts it 1.0
        assert data["arms"][arm]["curve"] == discovery_curve(load_rows(out / arm))
        assert len(row[arm]["seeds"]) == 1
        assert row[arm]["geomean"] == geomean_fail1(row[arm]["seeds"])
    text = files.markdown.read_text()
    assert "| robust-kbench/scale |" in text and "## Discovery curves" in text
    assert (out / "build" / "memory" / "htam.db").exists()


@pytest.mark.slow
def test_frozen_counts_match_the_step_records(experiment):
    out, files, _ = experiment
    data = json.loads(files.json.read_text())
    built = {k for k in data["arms"]["frozen"]["strategies_used"]}
    records = [json.loads(p.read_text()) for p in sorted((out / "frozen").rglob("step_*.json"))]
    assert sum(r["strategy"] in built for r in records) == sum(
        data["arms"]["frozen"]["strategies_used"].values()
    )


@pytest.mark.slow
def test_cli_bad_suite_is_one_line(tmp_path):
    done = subprocess.run(
        [*htam_cli(), "transfer", "builtin", str(tmp_path / "missing"), "--target", "cpu",
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=cli_env(), timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "no such file or directory" in done.stderr and done.stderr.count("\n") == 1
