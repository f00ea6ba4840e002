"""The policy decides on the state of the size that is timed: a trigger on the input's size
("tiny tensors") holds at the small size and not at the large one, in the policy and in a run."""

from __future__ import annotations

from htam.agent import OptimizeConfig, Optimizer
from htam.memory import MemoryBank
from htam.offline import OfflineProposer
from htam.policy import PolicyConfig, StateFeatures, make_policy
from tests.evaluate.conftest import task_for
from tests.scripted_evaluator import ScriptedEvaluator

TINY = "tiny tensors"


def _launch_reasons(breakdown: dict) -> list[str]:
    return breakdown["directions"]["launch_overhead"]["prior_reasons"]


def test_the_prior_follows_the_size_of_each_state(seed_bank):
    """One policy, two states that differ only in size: each gets its own prior (a cache keyed
    without the size served the first one's "tiny tensors" to the second)."""
    policy = make_policy("htam", PolicyConfig(), seed_bank)
    tiny = StateFeatures(op_families=["elementwise"], ops=["relu"], elements=8_481)
    large = StateFeatures(op_families=["elementwise"], ops=["relu"], elements=33_554_432)
    assert any(TINY in r for r in _launch_reasons(policy.explain([], tiny)))
    assert not any(TINY in r for r in _launch_reasons(policy.explain([], large)))
    assert any(TINY in r for r in _launch_reasons(policy.explain([], tiny)))


def _decisions(tmp_path, size: str) -> list[dict]:
    records: list[dict] = []
    evaluator = ScriptedEvaluator(lambda n, code: 1.5 + 0.25 * n)
    evaluator.config.size = size
    cfg = OptimizeConfig(method="htam", steps=2, seed=0, target="cuda", language="triton")
    with MemoryBank.in_memory() as bank:
        Optimizer(
            OfflineProposer("cuda"), evaluator, bank, cfg,
            on_step=lambda step: records.append(step.to_dict()),
        ).run(task_for("level2/5_Elementwise_Chain.py"), tmp_path / size)  # fmt: skip
    return [r["decision"] for r in records if "directions" in r["decision"]]


def test_a_run_decides_on_the_state_of_the_size_it_times(tmp_path):
    # the chain task: 33x257 at the small size, 4096x8192 at the large one (timed on a GPU)
    small, large = _decisions(tmp_path, "small"), _decisions(tmp_path, "large")
    assert small and large
    assert all(any(TINY in r for r in _launch_reasons(d)) for d in small)
    assert not any(TINY in r for d in large for r in _launch_reasons(d))
