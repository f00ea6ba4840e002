"""The ablations behind make_policy: what each one removes, and nothing more."""

from __future__ import annotations

import importlib.util
import random
import subprocess
import sys
from pathlib import Path

import pytest

from htam.memory import MemoryBank
from htam.policy import (
    METHODS,
    PolicyConfig,
    StateFeatures,
    make_policy,
    position_weights,
    uniform_weights,
)
from htam.proposer import Strategy
from htam.vocab import Direction

CONFIG = PolicyConfig()
STATE = StateFeatures()


def test_every_method_is_available_and_unknown_ones_fail(seed_bank):
    assert set(METHODS) == {
        "htam", "no-prefix", "no-position", "no-update", "no-hierarchy", "no-local", "random",
    }  # fmt: skip
    for method in METHODS:
        decision = make_policy(method, CONFIG, seed_bank).decide(
            ["fusion"], STATE, random.Random(0)
        )
        assert sum(decision.probabilities.values()) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="FlatMemory"):
        make_policy("flat", CONFIG, seed_bank)
    with pytest.raises(ValueError, match="unknown method"):
        make_policy("genius", CONFIG, seed_bank)


def test_prefix_and_position_variants_weigh_the_prefix_differently(seed_bank):
    prefix = ["precision", "fusion", "memory_access", "data_reuse"]
    full = make_policy("htam", CONFIG, seed_bank).explain(prefix, STATE)
    assert full["prefix"] == prefix[-CONFIG.K :]
    assert full["weights"] == pytest.approx(
        list(reversed(position_weights(CONFIG.K, CONFIG.tau_pos)))
    )
    last = make_policy("no-prefix", CONFIG, seed_bank).explain(prefix, STATE)
    assert last["prefix"] == ["data_reuse"] and last["weights"] == [1.0]
    flat = make_policy("no-position", CONFIG, seed_bank).explain(prefix, STATE)
    assert flat["weights"] == pytest.approx(uniform_weights(CONFIG.K))


def test_variants_update_the_memory_as_they_score_it(toy_bank, make_record):
    make_policy("no-prefix", CONFIG, toy_bank).record(make_record(0, ["d0", "d2"], "d1", 0.5))
    assert toy_bank.edge("d0", "d1") is None and toy_bank.edge("d2", "d1").stats.weight_sum == 1
    make_policy("no-position", CONFIG, toy_bank).record(make_record(1, ["d0", "d3"], "d1", 0.5))
    assert toy_bank.edge("d0", "d1").stats.weight_sum == toy_bank.edge("d3", "d1").stats.weight_sum
    make_policy("htam", CONFIG, toy_bank).record(make_record(2, ["d3", "d0"], "d2", 0.5))
    assert toy_bank.edge("d0", "d2").stats.weight_sum > toy_bank.edge("d3", "d2").stats.weight_sum


def test_no_update_leaves_the_memory_frozen(toy_bank, make_record):
    policy = make_policy("no-update", CONFIG, toy_bank)
    before = toy_bank.export_json()
    assert not policy.updates_memory and not policy.record(make_record(0, ["d0"], "d1", 0.9))
    assert toy_bank.export_json() == before and toy_bank.step_count() == 0
    assert all(make_policy(m, CONFIG, toy_bank).updates_memory for m in METHODS if m != "no-update")


def test_candidates_per_variant(seed_bank):
    htam = make_policy("htam", CONFIG, seed_bank).candidates("fusion")
    assert all(isinstance(s, Strategy) and s.direction == "fusion" for s in htam)
    assert htam[0].id == "fusion.elementwise_chain_fusion" and len(htam) == 5
    flat = make_policy("no-hierarchy", CONFIG, seed_bank)
    assert len(flat.candidates("fusion")) == len(flat.candidates(Direction.ANY)) == 46
    assert make_policy("no-local", CONFIG, seed_bank).candidates("fusion") == []
    assert len(make_policy("random", CONFIG, seed_bank).candidates("precision")) == 5


def test_no_hierarchy_makes_no_direction_decision(seed_bank):
    policy = make_policy("no-hierarchy", CONFIG, seed_bank)
    decision = policy.decide(["fusion"], STATE, random.Random(1))
    assert decision.direction == Direction.ANY and decision.probabilities == {Direction.ANY: 1.0}
    assert decision.breakdown["method"] == "no-hierarchy"


def test_no_hierarchy_steps_record_under_the_strategy_parent(seed_bank, make_record):
    policy = make_policy("no-hierarchy", CONFIG, seed_bank)
    assert not policy.record(make_record(0, ["fusion"], Direction.ANY, 0.5))  # no strategy
    assert policy.record(make_record(1, [Direction.ANY, "fusion"], Direction.ANY, 0.5,
                                     local="precision.tensor_core_dot"))  # fmt: skip
    assert seed_bank.direction("precision").stats.tries == 1 == seed_bank.step_count()
    assert seed_bank.edge("fusion", "precision").stats.count == 1


def test_candidates_put_what_worked_and_what_fits_first(seed_bank, make_record):
    policy = make_policy("htam", CONFIG, seed_bank)
    late = "fusion.multi_output_fusion"
    for i in range(3):
        policy.record(make_record(i, [], "fusion", 0.7, local=late))
    assert policy.candidates("fusion")[0].id == late
    state = StateFeatures(op_families=["gemm", "conv"])
    ranked = [s.id for s in make_policy("htam", CONFIG, seed_bank).candidates("precision", state)]
    assert ranked[0] == "precision.tensor_core_dot"


def test_a_policy_uses_its_own_config_for_updates(toy_seed, make_record):
    slow = PolicyConfig(ema_alpha=0.01)
    with MemoryBank.in_memory(toy_seed) as bank:
        policy = make_policy("htam", slow, bank)
        policy.record(make_record(0, [], "d1", 1.0))
        policy.record(make_record(1, [], "d1", -1.0))
        assert bank.direction("d1").stats.ema == pytest.approx(0.99 - 0.01)


def test_memory_and_policy_stay_light():
    code = (
        "import sys, htam.memory, htam.policy, htam.memory.plot; "
        "heavy = [m for m in sys.modules if m == 'torch' or m.startswith(('htam.cli', "
        "'htam.evaluate', 'matplotlib'))]; print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_mechanism_check_ranks_full_htam_above_random():
    """A small run of scripts/experiments/mechanism_check.py (the full table is its output)."""
    path = Path(__file__).resolve().parents[2] / "scripts" / "experiments" / "mechanism_check.py"
    spec = importlib.util.spec_from_file_location("mechanism_check", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["mechanism_check"] = module  # dataclasses resolve annotations through it
    spec.loader.exec_module(module)
    config = PolicyConfig(K=2)
    full = module.run("htam", 0, 120, config.T, config)[60:]
    control = module.run("random", 0, 120, config.T, config)[60:]
    assert sum(full) / len(full) > sum(control) / len(control) + 0.3
