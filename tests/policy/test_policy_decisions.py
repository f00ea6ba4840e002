"""The transition-aware direction policy: scores, explanations, seeding and learning."""

from __future__ import annotations

import json
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htam.memory import MemoryBank
from htam.policy import PolicyConfig, StateFeatures, make_policy, position_weights
from htam.status import Status

RULE = PolicyConfig()  # the policy's update rule: the bank keeps none

CONFIG = PolicyConfig()
IDS = ["d0", "d1", "d2", "d3"]


def test_explain_is_json_and_its_terms_add_up(seed_bank):
    policy = make_policy("htam", CONFIG, seed_bank)
    state = StateFeatures(op_families=["softmax"], bound="memory", sol_fraction=0.4)
    info = json.loads(json.dumps(policy.explain(["fusion", "memory_access"], state)))
    assert info["prefix"] == ["fusion", "memory_access"]
    assert info["weights"] == pytest.approx(list(reversed(position_weights(2, CONFIG.tau_pos))))
    assert sum(info["probabilities"].values()) == pytest.approx(1.0)
    top = max(t["score"] for t in info["directions"].values())
    for g, t in info["directions"].items():
        parts = t["prefix"] + t["value_term"] + t["prior"] + t["exploration"]
        assert t["score"] == pytest.approx(parts)
        assert t["prefix"] == pytest.approx(sum(p["contribution"] for p in t["prefix_terms"]))
        assert [p["src"] for p in t["prefix_terms"]] == ["memory_access", "fusion"]  # k = 1, 2
        z = sum(math.exp((u["score"] - top) / CONFIG.T_g) for u in info["directions"].values())
        assert info["probabilities"][g] == pytest.approx(
            math.exp((t["score"] - top) / CONFIG.T_g) / z
        )
    ma = info["directions"]["memory_access"]
    assert ma["prior"] == pytest.approx(0.8) and len(ma["prior_reasons"]) == 2
    # the seeded prior fusion -> memory_access (0.15) is the k = 2 term
    assert ma["prefix_terms"][1]["utility"] == pytest.approx(0.15)


def test_state_triggers_shape_the_prior(seed_bank):
    policy = make_policy("htam", CONFIG, seed_bank)
    wrong = policy.explain([], StateFeatures(last_status=Status.INCORRECT))
    assert max(wrong["probabilities"], key=wrong["probabilities"].get) == "boundary_handling"
    gemm = policy.explain([], StateFeatures(op_families=["gemm"], bound="compute"))
    assert max(gemm["probabilities"], key=gemm["probabilities"].get) in ("precision", "data_reuse")
    unknown = policy.explain([], StateFeatures())
    assert all(t["prior"] == 0 for t in unknown["directions"].values())


def test_directions_without_a_suitable_strategy_are_penalised(toy_bank):
    policy = make_policy("htam", CONFIG, toy_bank)
    terms = policy.explain([], StateFeatures(op_families=["softmax"]))["directions"]
    assert terms["d0"]["prior"] == 0  # d0.b suits softmax
    assert terms["d1"]["prior"] == -CONFIG.off_family_penalty
    assert terms["d1"]["prior_reasons"] == ["no strategy for softmax"]


def _trained(seed_data: dict, make_record) -> MemoryBank:
    bank = MemoryBank.in_memory(seed_data)
    for i in range(12):
        bank.record_step(make_record(i, [IDS[i % 4], IDS[(i + 1) % 4]], IDS[(i + 2) % 4],
                                     (i % 5) / 5 - 0.3), config=RULE)  # fmt: skip
    return bank


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 2**32), prefix=st.lists(st.sampled_from(IDS), max_size=4))
def test_decisions_are_reproducible_with_a_seed(toy_seed, make_record, seed, prefix):
    with _trained(toy_seed, make_record) as one, _trained(toy_seed, make_record) as two:
        state = StateFeatures(op_families=["gemm"])
        p1, p2 = make_policy("htam", CONFIG, one), make_policy("htam", CONFIG, two)
        first = [p1.decide(prefix, state, random.Random(seed)) for _ in range(3)]
        second = [p2.decide(prefix, state, random.Random(seed)) for _ in range(3)]
        assert [d.direction for d in first] == [d.direction for d in second]
        assert first[0].probabilities == second[0].probabilities
        assert first[0].breakdown == second[0].breakdown
        rng = random.Random(seed)
        sequence = [p1.decide(prefix, state, rng).direction for _ in range(40)]
        rng = random.Random(seed)
        assert sequence == [p1.decide(prefix, state, rng).direction for _ in range(40)]


def test_sampling_follows_the_probabilities(toy_bank, make_record):
    for i in range(10):
        toy_bank.record_step(make_record(i, ["d0"], "d1", 0.9), config=RULE)
    policy = make_policy("htam", CONFIG, toy_bank)
    rng = random.Random(0)
    decisions = [policy.decide(["d0"], StateFeatures(), rng) for _ in range(2000)]
    expected = decisions[0].probabilities
    share = sum(d.direction == "d1" for d in decisions) / len(decisions)
    assert expected["d1"] > 0.5 and share == pytest.approx(expected["d1"], abs=0.03)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(4, 25),
    gain=st.floats(0.1, 1.0),
    loss=st.floats(-1.0, -0.1),
    src=st.sampled_from(IDS),
)
def test_a_paying_transition_ends_more_likely_than_a_failing_one(
    toy_seed, make_record, n, gain, loss, src
):
    good, bad = [g for g in IDS if g != src][:2]
    with MemoryBank.in_memory(toy_seed) as bank:
        policy = make_policy("htam", CONFIG, bank)
        before = policy.explain([src], StateFeatures())["probabilities"]
        assert before[good] == pytest.approx(before[bad])
        for i in range(n):
            policy.record(make_record(2 * i, [src], good, gain))
            policy.record(make_record(2 * i + 1, [src], bad, loss))
        after = policy.explain([src], StateFeatures())["probabilities"]
        assert after[good] > after[bad] and after[bad] < before[bad]
        # (untried directions gain exploration bonus meanwhile; without it the good one rises)
        greedy = make_policy("htam", PolicyConfig(c=0), bank).explain([src], StateFeatures())
        assert greedy["probabilities"][good] > before[good]
        terms = policy.explain([src], StateFeatures())["directions"]
        assert terms[good]["prefix_terms"][0]["utility"] > terms[bad]["prefix_terms"][0]["utility"]


def test_the_prefix_matters_after_learning(toy_bank, make_record):
    """d1 pays after d0 and fails after d2: the same direction, two different prefixes."""
    policy = make_policy("htam", CONFIG, toy_bank)
    for i in range(30):
        policy.record(make_record(2 * i, ["d0"], "d1", 0.8))
        policy.record(make_record(2 * i + 1, ["d2"], "d1", -0.8))
    after_d0 = policy.explain(["d0"], StateFeatures())["probabilities"]["d1"]
    after_d2 = policy.explain(["d2"], StateFeatures())["probabilities"]["d1"]
    assert after_d0 > 0.5 > 0.05 > after_d2


def test_exploration_favours_untried_directions(toy_bank, make_record):
    for i in range(20):
        toy_bank.record_step(make_record(i, [], "d0", 0.0), config=RULE)
    terms = make_policy("htam", CONFIG, toy_bank).explain([], StateFeatures())["directions"]
    assert terms["d1"]["exploration"] == pytest.approx(CONFIG.c * math.sqrt(math.log(20)))
    assert terms["d0"]["exploration"] == pytest.approx(CONFIG.c * math.sqrt(math.log(20) / 21))


def test_random_method_is_uniform(seed_bank):
    policy = make_policy("random", CONFIG, seed_bank)
    rng = random.Random(3)
    picks = [policy.decide([], StateFeatures(), rng).direction for _ in range(800)]
    assert set(picks) == set(seed_bank.direction_ids)
    assert max(picks.count(g) for g in set(picks)) < 120  # 80 expected per direction
    assert set(policy.explain([], StateFeatures())["probabilities"].values()) == {1 / 10}


def test_edge_rule_mean_is_the_shrunk_weighted_mean_of_the_edge(toy_bank, make_record):
    for i, r in enumerate((0.8, 0.4)):
        toy_bank.record_step(make_record(i, ["d0"], "d1", r), weights=[1.0], config=RULE)
    mean = PolicyConfig(edge_rule="mean", K=1)
    terms = make_policy("htam", mean, toy_bank).explain(["d0"], StateFeatures())["directions"]
    value = 1.2 / (2 + mean.value_shrink)  # V(d1) = 0.4
    # (sum w*r + shrink * (V + prior 0)) / (sum w + shrink) = (1.2 + 2 * 0.4) / 4 = 0.5
    assert terms["d1"]["prefix_terms"][0]["utility"] == pytest.approx((1.2 + 2 * value) / 4)
    lms = make_policy("htam", PolicyConfig(K=1), toy_bank).explain(["d0"], StateFeatures())
    fit = toy_bank.edge("d0", "d1").stats.fit
    assert lms["directions"]["d1"]["prefix_terms"][0]["utility"] == pytest.approx(value + fit)


def test_an_edge_whose_condition_fails_does_not_score(seed_bank):
    policy = make_policy("htam", CONFIG, seed_bank)
    memory_bound = policy.explain(["fusion"], StateFeatures(bound="memory"))
    compute_bound = policy.explain(["fusion"], StateFeatures(bound="compute"))
    assert "fusion->memory_access" in compute_bound["edges_not_applicable"]
    assert "fusion->memory_access" not in memory_bound["edges_not_applicable"]
    term = memory_bound["directions"]["memory_access"]["prefix_terms"][0]
    assert term["advantage"] == pytest.approx(0.15)  # the seed prior
    off = compute_bound["directions"]["memory_access"]["prefix_terms"][0]
    assert off["advantage"] == 0.0


def test_exhausted_directions_are_left_out_and_the_memory_ranks_the_rest(toy_bank, make_record):
    """A direction with nothing new left is excluded; pi over the rest is the softmax of their
    own scores (the transition-aware score still decides among them)."""
    for i in range(10):
        toy_bank.record_step(make_record(i, ["d0"], "d1", 0.9), config=RULE)
        toy_bank.record_step(make_record(10 + i, ["d0"], "d3", -0.9), config=RULE)
    policy = make_policy("htam", CONFIG, toy_bank)
    full = policy.explain(["d0"], StateFeatures())
    assert max(full["probabilities"], key=full["probabilities"].get) == "d1"
    rng = random.Random(0)
    picks = [policy.decide(["d0"], StateFeatures(), rng, frozenset({"d1"})) for _ in range(300)]
    assert {d.direction for d in picks} <= {"d0", "d2", "d3"}
    kept = picks[0].probabilities
    assert set(kept) == {"d0", "d2", "d3"} and sum(kept.values()) == pytest.approx(1.0)
    scores = {g: full["directions"][g]["score"] for g in kept}
    top = max(scores.values())
    z = sum(math.exp((s - top) / CONFIG.T_g) for s in scores.values())
    for g, s in scores.items():
        assert kept[g] == pytest.approx(math.exp((s - top) / CONFIG.T_g) / z)
    assert kept["d3"] < kept["d0"]  # the failing transition stays unlikely
    assert picks[0].breakdown["excluded"] == ["d1"]
    # every direction exhausted: nothing is left out (the step then repeats, as before)
    everything = policy.decide(["d0"], StateFeatures(), random.Random(0), frozenset(IDS))
    assert everything.probabilities == full["probabilities"]
    assert everything.breakdown["excluded"] == [] and everything.breakdown["exhausted"] == IDS


def test_exhausted_strategies_are_no_candidates(seed_bank):
    policy = make_policy("htam", CONFIG, seed_bank)
    every = [s.id for s in policy.candidates("fusion")]
    left = [s.id for s in policy.candidates("fusion", None, frozenset(every[:2]))]
    assert left == every[2:]
    flat = make_policy("no-hierarchy", CONFIG, seed_bank)
    assert every[0] not in [s.id for s in flat.candidates("fusion", None, frozenset(every[:1]))]
