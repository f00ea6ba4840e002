"""Kill -9 a real `htam optimize` during step 3, resume it, and get exactly the memory of an
uninterrupted run with the same seed and caches: no step is counted twice."""

import hashlib
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from htam.llm.replay_server import ReplayServer, Scripted
from tests.agent.conftest import CHAIN, FIXTURES, choice, fenced, variant


def _optimize(server, tmp_path, name, extra=()):
    cmd = [
        sys.executable,
        "-m",
        "htam.cli",
        "optimize",
        CHAIN,
        "--base-url",
        server.base_url,
        "--model",
        server.model,
        "--target",
        "cpu",
        "--language",
        "triton",
        "--seed",
        "3",
        "--steps",
        "6",
        "--memory",
        str(tmp_path / f"{name}.db"),
        "--out",
        str(tmp_path / name),
        *extra,
    ]
    env = {**os.environ, "HTAM_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "120"}
    return subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _export(tmp_path, name):
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "htam.cli",
            "memory",
            "export",
            str(tmp_path / f"{name}.db"),
            str(tmp_path / f"{name}.json"),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.returncode == 0
    data = json.loads((tmp_path / f"{name}.json").read_text())
    for section in ("steps", "evidence"):  # when a record was written is not what it says
        for item in data[section]:
            item.pop("recorded_at")
    # one run, one id (the resumed run kept the interrupted one's); ids differ between runs
    ids = {item["run_id"] for section in ("steps", "evidence", "flat") for item in data[section]}
    assert len(ids) == 1, ids
    for section in ("steps", "evidence", "flat"):
        for item in data[section]:
            item["run_id"] = "the run"
    return data


@pytest.mark.slow
def test_kill_during_step_3_then_resume(tmp_path, prices):
    good = (FIXTURES / "chain_triton.py").read_text()

    def code(request):
        """A correct kernel, the same for the same prompt (so both runs see the same replies)
        and distinct across prompts (a run evaluates no code twice)."""
        text = request.text()
        if "strategy_id" in text or "ModelNew" not in text:
            return None
        n = int(hashlib.sha1(text.encode()).hexdigest()[:8], 16)
        return Scripted(content=fenced(variant(good, n)), delay_s=0.4)

    replies = [Scripted(content=choice("not.a.strategy"), when="strategy_id", repeat=True)]
    with ReplayServer(replies, matcher=code) as server:
        run = _optimize(server, tmp_path, "b")
        steps = tmp_path / "b" / "steps"
        deadline = time.monotonic() + 240
        while not (steps / "step_01.json").exists():
            assert run.poll() is None, run.stdout.read()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        os.kill(run.pid, signal.SIGKILL)
        run.wait()
        done = len(list(steps.glob("step_*.json")))
        assert 2 <= done < 6, f"the kill should land inside the run, {done} steps were done"
        resumed = _optimize(server, tmp_path, "b", ["--resume"])
        assert resumed.wait(timeout=300) == 0, resumed.stdout.read()
        full = _optimize(server, tmp_path, "a")
        assert full.wait(timeout=300) == 0, full.stdout.read()
        # off a terminal: a line per step as it finishes, then the summary lines (no table)
        printed = full.stdout.read()
        assert [printed.count(f"step {i}:") for i in range(6)] == [1] * 6
        assert "┘" not in printed and "\n6 steps · $" in printed
        last = printed.strip().splitlines()[-1]
        assert last.startswith(("best: ", "no faster candidate: the reference stands")), last
    summary = json.loads((tmp_path / "b" / "summary.json").read_text())
    assert summary["steps"] == 6
    # its time counts the steps of the run that was killed too (newcomer round 6)
    steps_s = sum(json.loads(f.read_text())["wall_s"] for f in steps.glob("step_*.json"))
    assert summary["wall_s"] >= steps_s and summary["resumed_s"] > 0, (summary, steps_s)
    a, b = _export(tmp_path, "a"), _export(tmp_path, "b")
    assert a == b
    assert len(a["steps"]) == 6  # six steps recorded once each, none twice
