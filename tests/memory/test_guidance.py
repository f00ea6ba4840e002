"""The text handed to LLM prompts: direction priors and stats, strategy, evidence, edge."""

from __future__ import annotations

from htam.memory import guidance
from htam.policy import PolicyConfig
from htam.status import Status
from htam.vocab import Direction

RULE = PolicyConfig()  # the policy's update rule: the bank keeps none


def test_guidance_renders_every_part(bank, make_step):
    prev, direction = "algorithmic_rewrite", "instruction_throughput"
    local = "instruction_throughput.fast_exp2"
    bank.record_step(
        make_step(0, prefix=[prev], direction=direction, local=local, reward=0.6,
                  lesson="fold log2e into the scale"), config=RULE
    )  # fmt: skip
    bank.record_step(
        make_step(1, prefix=[prev], direction=direction, local=local,
                  status=Status.INCORRECT, reward=-0.5, error="max abs diff 3e-2"), config=RULE
    )  # fmt: skip
    text = guidance(bank, direction, local, prev)
    assert "Direction: Instruction Throughput (instruction_throughput)" in text
    assert "Record: 2 tries, 1 improved, mean reward +0.05" in text
    assert "Strategy: exp via exp2 with folded log2(e)" in text
    assert "Verify after applying: max error against torch.exp" in text
    assert "Worked on sig-task: 1.00x -> 1.40x (reward +0.60); lesson: fold log2e" in text
    assert "Failed on sig-task: incorrect (reward -0.50); error: max abs diff 3e-2" in text
    assert "Transition algorithmic_rewrite -> instruction_throughput:" in text
    # fit: 0.1 + (0.6 - 0.1) / 3 = 0.267, then 0.267 + 0.3 * (-0.5 - (0.3 + 0.267)) = -0.053
    assert (
        "mean reward +0.05 over 2 steps (incorrect 1, ok 1), learned advantage -0.05 "
        "(prior +0.10)" in text
    )
    assert len(text) < 3000


def test_guidance_without_local_or_previous_step(bank):
    text = guidance(bank, "fusion", None, None)
    assert text.startswith("Direction: Fusion (fusion)") and "Record: not tried yet." in text
    assert "Strategy:" not in text and "Transition" not in text
    unseen = guidance(bank, "fusion", None, "precision")
    assert "Transition precision -> fusion:" in unseen and "not observed yet" in unseen
    assert "no prior knowledge" in guidance(bank, "precision", None, "boundary_handling")


def test_guidance_for_a_flat_decision_uses_the_strategy_parent(bank):
    text = guidance(bank, Direction.ANY, "precision.tensor_core_dot", None)
    assert text.startswith("Direction: Precision (precision)")
    assert guidance(bank, Direction.ANY, None, None) == ""
