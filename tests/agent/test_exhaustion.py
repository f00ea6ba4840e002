"""A strategy (or a whole direction) whose code the run has evaluated already is not chosen again
for the same code: the step decides again without it instead of being spent on a repeat.

Newcomer: with a bank that had learned fusion fails, `optimize level2/5_Elementwise_Chain`
spent steps 3, 4 and 5 on memory_access.vectorized_access, whose code step 2 had evaluated,
and never tried fusion. In-process evaluators keep these tests fast: what is checked is the
loop's decisions, not a kernel."""

from __future__ import annotations

import json
import math

import pytest

from htam.agent import OptimizeConfig, Optimizer
from htam.evaluate.result import EvalResult, Timing
from htam.memory import MemoryBank, StepRecord
from htam.policy import PolicyConfig
from htam.proposer import Choice, Proposal
from htam.status import Status
from tests.evaluate.conftest import task_for
from tests.scripted_evaluator import ScriptedEvaluator

RELU = "level1/1_ReLU.py"
CHAIN = "level2/5_Elementwise_Chain.py"


def first_best() -> ScriptedEvaluator:
    """Every candidate correct; the first one 2x faster than the reference, every later one
    1.5x: the code the loop continues from stays the first step's."""
    return ScriptedEvaluator(lambda n, code: 2.0 if n == 0 else 1.5)


class OneCodePerStrategy:
    """Takes the first candidate and writes the same code for a strategy every time (as a
    template does for the same base code)."""

    name = "one-code-per-strategy"

    def can_propose(self, task):
        return True

    def choose_strategy(self, request, candidates):
        return Choice(candidates[0], rationale="the first")

    def propose(self, request):
        sid = request.strategy.id if request.strategy else "none"
        return Proposal(
            code=f"import torch\n\n\nclass ModelNew(torch.nn.Module):\n    S = {sid!r}\n"
        )


def three_directions() -> dict:
    return {
        "format": "htam-seed",
        "version": 1,
        "globals": [{"id": f"d{i}", "title": f"D{i}", "intent": "test"} for i in range(3)],
        "locals": [
            {
                "id": f"d{i}.{n}",
                "direction": f"d{i}",
                "title": n,
                "description": "",
                "pattern": "",
                "op_families": ["elementwise"],
            }
            for i in range(3)
            for n in ("a", "b")
        ],  # fmt: skip
        "edges": [],
    }


def favour_d0(bank: MemoryBank) -> None:
    """Past runs where d0 paid every time: the policy all but always picks d0."""
    for i in range(12):
        record = StepRecord("past", "other", "sig", i, [], "d0", "d0.a", Status.OK, 1.0, 2.0,
                            0.9, "", "d0.a: correct")  # fmt: skip
        bank.record_step(record, weights=[], config=PolicyConfig())


def optimize(bank, out, steps=5, on_step=None, resume=False, proposer=None, task=RELU,
             evaluator=None, **cfg):  # fmt: skip
    config = OptimizeConfig(method="htam", steps=steps, seed=0, target="cpu", language="cpp",
                            **cfg)  # fmt: skip
    evaluator = evaluator or first_best()
    optimizer = Optimizer(proposer or OneCodePerStrategy(), evaluator, bank, config,
                          on_step=on_step)  # fmt: skip
    return optimizer.run(task_for(task), out, resume=resume)


def step_files(out) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "steps").glob("step_*.json"))]


def test_an_exhausted_strategy_and_direction_are_not_picked_again(tmp_path):
    with MemoryBank.in_memory(three_directions()) as bank:
        favour_d0(bank)
        summary = optimize(bank, tmp_path / "run")
        steps = step_files(tmp_path / "run")
        assert [s["repeats_step"] for s in steps] == [None] * 5  # every step evaluated new code
        assert summary.duplicates > 0  # the repeats were asked for, and not spent as steps
        strategies = [s["strategy"] for s in steps]
        assert len(set(strategies)) == 5 and strategies[:2] == ["d0.a", "d0.b"]
        # step 2: d0.b again repeated step 1's code; d0 then had nothing new: decided without it
        third = steps[2]["decision"]
        assert third["skipped"] == [{"direction": "d0", "strategy": "d0.b", "repeats_step": 1}]
        assert third["excluded"] == ["d0"] and set(third["probabilities"]) == {"d1", "d2"}
        assert steps[2]["exhausted_strategies"] == ["d0.b"]
        assert steps[2]["exhausted_directions"] == ["d0"]
        assert steps[1]["exhausted_strategies"] == ["d0.a"]  # d0.a repeated step 0's code
        assert all(s["memory_updated"] for s in steps)
        assert bank.step_count() == 12 + 5  # the past and one record per step, no repeat


def test_without_redecisions_a_repeat_spends_the_step_and_is_not_repaired(tmp_path):
    with MemoryBank.in_memory(three_directions()) as bank:
        favour_d0(bank)
        optimize(bank, tmp_path / "run", steps=4, redecisions=0)
        steps = step_files(tmp_path / "run")
    assert [s["repeats_step"] for s in steps] == [None, 0, None, 2]
    # the repeat is no failure to repair: step 2 decides, leaving out what step 1 exhausted
    assert [s["repair_of"] for s in steps] == [None] * 4
    assert [s["strategy"] for s in steps] == ["d0.a", "d0.a", "d0.b", "d0.b"]
    assert steps[2]["decision"]["direction"] == "d0" and "excluded" not in steps[2]["decision"]


def test_a_new_best_makes_exhausted_strategies_candidates_again(tmp_path):
    """Applied to other code a strategy writes other code: exhaustion is for the code the loop
    continues from, and a new best clears it."""
    from htam.agent.state import Progress
    from htam.agent.view import PathStep

    progress = Progress(ref_ms=1.0)
    progress.exhausted_strategies.add("d0.a")
    progress.exhausted_directions.add("d0")
    slower = EvalResult(Status.OK, runtime_ms=2.0, ref_runtime_ms=1.0)
    faster = EvalResult(Status.OK, runtime_ms=0.5, ref_runtime_ms=1.0)
    progress.best_result = EvalResult(Status.OK, runtime_ms=1.0, ref_runtime_ms=1.0)
    assert not progress.observe(slower, "x", "d1", PathStep("d1", "d1.a", "ok 0.50x"))
    assert progress.exhausted_strategies == {"d0.a"} and progress.exhausted_directions == {"d0"}
    assert progress.observe(faster, "y", "d1", PathStep("d1", "d1.b", "ok 2.00x"))
    assert progress.exhausted_strategies == set() and progress.exhausted_directions == set()


def test_a_resumed_run_leaves_out_what_the_interrupted_one_found_exhausted(tmp_path):
    def decisions(out):
        keys = ("direction", "strategy", "decision", "repeats_step", "exhausted_strategies")
        return [{k: s[k] for k in keys} for s in step_files(out)]

    with MemoryBank.in_memory(three_directions()) as bank:
        favour_d0(bank)
        optimize(bank, tmp_path / "whole")
    with MemoryBank.in_memory(three_directions()) as bank:
        favour_d0(bank)

        def stop_after_step_2(step):
            if step.step == 2:
                raise KeyboardInterrupt

        evaluator = first_best()  # its results go on where they stopped
        with pytest.raises(KeyboardInterrupt):
            optimize(bank, tmp_path / "cut", on_step=stop_after_step_2, evaluator=evaluator)
        assert len(step_files(tmp_path / "cut")) == 3
        optimize(bank, tmp_path / "cut", resume=True, evaluator=evaluator)
        assert bank.step_count() == 12 + 5
    assert decisions(tmp_path / "cut") == decisions(tmp_path / "whole")


# Speedups of the offline chain kernels as the newcomer's run measured them at the small size
# (the unmodified kernel 1.59x, vectorized access 1.42x on it, ...), with its noise (IQR about
# 15%) and its 5% of speed of light: the state and the rewards the policy saw.
CHAIN_FACTORS = {
    "memory_access.vectorized_access": 0.9,
    "boundary_handling.masked_tail": 1.03,
    "parallel_mapping.block_size_tuning": 1.02,
    "fusion.elementwise_chain_fusion": 1.07,
    "instruction_throughput.fast_exp2": 0.95,
}


def chain_times(n: int, code: str) -> EvalResult:
    """The chain's time from the strategies the template applied (its code's header)."""
    header = code.split("\n", 1)[0].removeprefix("# htam-offline: ")
    applied = json.loads(header)["applied"]
    ms = 1.0 / (1.59 * math.prod(CHAIN_FACTORS[s] for s in applied))
    timing = Timing(ms, ms * 0.75, ms * 1.3, ms * 0.15, 40, "perf_counter")
    return EvalResult(
        Status.OK, runtime_ms=ms, ref_runtime_ms=1.0, timing=timing, sol_fraction=0.05
    )


def test_the_newcomers_chain_decides_again_instead_of_repeating(tmp_path):
    """The offline proposer on the chain with a bank that learned fusion fails (3 failures,
    trend about -0.5): before, steps 2 and 3 went to memory_access.vectorized_access again,
    whose code step 1 had evaluated, and were spent as repeats."""
    from htam.offline import OfflineProposer

    config = PolicyConfig()
    with MemoryBank.in_memory() as bank:
        failures = [(Status.COMPILE_ERROR, -0.6), (Status.INCORRECT, -0.5),
                    (Status.RUNTIME_ERROR, -0.6)]  # fmt: skip
        for i, (status, r) in enumerate(failures):
            record = StepRecord("earlier", "level2/5_Elementwise_Chain", "chain", i, [], "fusion",
                                "fusion.elementwise_chain_fusion", status, None, None, r, "boom",
                                "failed")  # fmt: skip
            bank.record_step(record, weights=[], config=config)
        assert bank.direction("fusion").stats.ema < -0.5
        summary = optimize(bank, tmp_path / "run", steps=6, proposer=OfflineProposer("cpu"),
                           task=CHAIN, evaluator=ScriptedEvaluator(chain_times))  # fmt: skip
    steps = step_files(tmp_path / "run")
    assert [s["repeats_step"] for s in steps] == [None] * 6
    assert summary.statuses == ["ok"] * 6 and summary.duplicates > 0
    assert steps[1]["strategy"] == "memory_access.vectorized_access"
    skipped = steps[2]["decision"]["skipped"]
    assert skipped[0]["strategy"] == "memory_access.vectorized_access"
    assert skipped[0]["repeats_step"] == 1
    assert "memory_access" in steps[2]["decision"]["excluded"]
    assert steps[2]["strategy"] != "memory_access.vectorized_access"


def test_a_failed_baseline_is_not_repaired_under_no_direction(tmp_path):
    """Newcomer: the baseline (the operator as written, direction "none") timed out on a GEMM
    at its CPU size; the next step repaired it under "none" and crashed with "unknown
    direction 'none'", and so did every resume. A fresh decision follows it instead."""

    class BaselineFirst(OneCodePerStrategy):
        written = 0

        def propose(self, request):
            self.written += 1
            if self.written == 1:  # the first step writes the operator as written
                return Proposal(code="class ModelNew:\n    pass\n", baseline=True)
            return super().propose(request)

    evaluator = ScriptedEvaluator(lambda n, code: Status.TIMEOUT if n == 0 else 1.5)
    with MemoryBank.in_memory(three_directions()) as bank:
        favour_d0(bank)
        summary = optimize(bank, tmp_path / "run", steps=3, proposer=BaselineFirst(),
                           evaluator=evaluator)  # fmt: skip
        steps = step_files(tmp_path / "run")
    assert [s["repair_of"] for s in steps] == [None] * 3
    assert steps[0]["direction"] == "none" and steps[1]["direction"].startswith("d")
    assert summary.best_speedup == pytest.approx(1.5, rel=0.05)
