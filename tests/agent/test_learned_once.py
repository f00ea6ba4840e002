"""A rerun served the same evaluations (from the cache) does not teach the bank again, and what
the memory learns carries what it was measured on: target, language, device and the size timed,
whose shapes are also the state the policy decides on."""

from __future__ import annotations

import json

from htam.agent import OptimizeConfig, Optimizer
from htam.memory import MemoryBank
from htam.offline import OfflineProposer
from tests.evaluate.conftest import task_for
from tests.scripted_evaluator import ScriptedEvaluator

CHAIN = "level2/5_Elementwise_Chain.py"


def _run(bank, out, method="htam", size="small"):
    evaluator = ScriptedEvaluator(lambda n, code: 1.5 + 0.25 * n)
    evaluator.config.size = size
    cfg = OptimizeConfig(method=method, steps=3, seed=0, target="cpu", language="cpp")
    return Optimizer(OfflineProposer("cpu"), evaluator, bank, cfg).run(task_for(CHAIN), out)


def test_a_rerun_of_the_same_candidates_is_not_learned_twice(tmp_path):
    with MemoryBank.in_memory() as bank:
        _run(bank, tmp_path / "a")
        learned = bank.step_count()
        tries = sum(d.stats.tries for d in bank.directions())
        _run(bank, tmp_path / "b")  # a new run id, the same code and outcomes
        assert learned == 3 and bank.step_count() == learned
        assert sum(d.stats.tries for d in bank.directions()) == tries
    second = [json.loads(p.read_text()) for p in sorted((tmp_path / "b/steps").glob("*.json"))]
    assert [s["memory_updated"] for s in second] == [False] * 3


def test_the_flat_baseline_learns_a_candidate_once_too(tmp_path):
    with MemoryBank.in_memory() as bank:
        _run(bank, tmp_path / "a", method="flat")
        count = bank.connection.execute("SELECT count(*) FROM flat_experiences").fetchone()[0]
        _run(bank, tmp_path / "b", method="flat")
        again = bank.connection.execute("SELECT count(*) FROM flat_experiences").fetchone()[0]
    assert count > 0 and again == count


def test_evidence_and_state_carry_the_timed_size_and_the_target(tmp_path):
    with MemoryBank.in_memory() as bank:
        _run(bank, tmp_path / "a", size="large")
        rows = bank.connection.execute("SELECT task_signature, context FROM evidence").fetchall()
    small = task_for(CHAIN)
    from htam.tasks import signature

    assert rows and all(r[0] == signature(small, "large").text for r in rows)
    assert signature(small, "large").text != signature(small, "small").text
    context = json.loads(rows[0][1])
    assert context == {"target": "cpu", "language": "cpp", "device": "cpu", "size": "large"}


def test_evidence_measured_on_another_target_is_not_offered(tmp_path):
    from htam.memory import StepRecord, choice_guidance
    from htam.policy import PolicyConfig

    with MemoryBank.in_memory() as bank:
        local = bank.locals_of("fusion")[0]
        record = StepRecord(
            run_id="r", task_id="t", task_signature="f32[8]", step=0, prefix=[],
            direction="fusion", local_id=local.id, status="compile_error",
            speedup_before=None, speedup_after=None, reward=-0.6,
            error_excerpt="g++: CPU-ONLY-FAILURE", context={"target": "cpu", "language": "cpp"},
        )  # fmt: skip
        bank.record_step(record, config=PolicyConfig())
        shown = {}
        for target in ("cpu", "cuda"):
            bank.scope = target  # a run reads its target's scope (as the loop sets it)
            shown[target] = choice_guidance(bank, "fusion", [local.id], [], target=target)
    assert "CPU-ONLY-FAILURE" in shown["cpu"] and "CPU-ONLY-FAILURE" not in shown["cuda"]


def test_the_summary_reports_the_prefix_share_of_each_decision(tmp_path):
    with MemoryBank.in_memory() as bank:
        summary = _run(bank, tmp_path / "a")
    shares = summary.prefix_shares
    assert len(shares) == summary.steps
    assert all(s is None or 0.0 <= s <= 1.0 for s in shares)
    assert any(s is not None for s in shares)
