"""Learning from steps: statistics, EMA, bounded evidence, weighted edges, idempotency."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from htam.memory import MemoryBank
from htam.memory.updates import EXCERPT_LIMIT
from htam.policy import PolicyConfig, position_weights
from htam.status import Status
from htam.vocab import Direction

RULE = PolicyConfig()  # the policy's update rule: the bank keeps none
K2 = PolicyConfig(K=2)
DIRECTIONS = ["memory_access", "fusion", "parallel_mapping", "precision"]


def test_global_and_local_statistics(bank, make_step):
    assert bank.record_step(make_step(0, reward=0.5), config=RULE)
    assert bank.record_step(make_step(1, reward=-0.6, status=Status.COMPILE_ERROR), config=RULE)
    g = bank.direction("fusion").stats
    assert (g.tries, g.successes) == (2, 1)
    assert g.reward_sum == pytest.approx(-0.1)
    assert g.ema == pytest.approx(0.7 * 0.5 + 0.3 * -0.6)  # first reward, then alpha = 0.3
    assert g.status_counts == {"ok": 1, "compile_error": 1}
    local = bank.local("fusion.elementwise_chain_fusion").stats
    assert (local.tries, local.successes, local.status_counts) == (2, 1, g.status_counts)
    assert bank.direction("precision").stats.tries == 0


def test_correct_but_slower_is_not_a_success(bank, make_step):
    bank.record_step(make_step(0, reward=-0.2), config=RULE)
    assert bank.direction("fusion").stats.successes == 0
    assert [e.polarity for e in bank.evidence("fusion.elementwise_chain_fusion")] == ["negative"]


def test_edges_get_every_prefix_position_weighted(bank, make_step):
    config = PolicyConfig()
    prefix = ["memory_access", "precision", "parallel_mapping"]  # most recent last
    priors = {"memory_access": 0.1, "precision": 0.15, "parallel_mapping": 0.0}  # seed fits
    bank.record_step(make_step(0, prefix=prefix, reward=0.8), config=RULE)
    w = position_weights(3, config.tau_pos)  # w[0] is the most recent
    assert w[0] > w[1] > w[2]
    # V(fusion) was 0 before the step: the error is the reward minus the weighted prior fits
    error = 0.8 - sum(wk * priors[src] for src, wk in zip(reversed(prefix), w, strict=True))
    for src, weight in zip(reversed(prefix), w, strict=True):
        stats = bank.edge(src, "fusion").stats
        assert stats.count == 1
        assert stats.weight_sum == pytest.approx(weight)
        assert stats.reward_wsum == pytest.approx(weight * 0.8)
        assert stats.observed == pytest.approx(0.8)
        step = max(config.edge_lr, 1 / (weight + config.shrink))
        assert stats.fit == pytest.approx(priors[src] + weight * error * step)


def test_an_older_step_gets_only_the_credit_the_recent_one_leaves(make_step):
    """In paths x -> b -> c the recent edge b -> c explains the reward, so x -> c stays small."""
    with MemoryBank.in_memory() as bank:
        for i in range(60):
            bank.record_step(
                make_step(i, prefix=["memory_access", "precision"], local=None, reward=0.8),
                config=K2,
            )
        for i in range(60, 80):  # the direct x -> c transition is bad
            bank.record_step(make_step(i, prefix=["data_reuse", "memory_access"], local=None,
                                       reward=-0.6), config=K2)  # fmt: skip
        direct = bank.edge("memory_access", "fusion").stats
        assert direct.observed > 0.2  # the raw mean is flattered by the x -> b -> c paths
        assert direct.fit < bank.edge("precision", "fusion").stats.fit


def test_prefix_longer_than_k_keeps_the_last_k(make_step):
    with MemoryBank.in_memory() as bank:
        prefix = ["boundary_handling", "memory_access", "parallel_mapping"]
        bank.record_step(make_step(0, prefix=prefix), config=K2)
        assert bank.edge("boundary_handling", "fusion") is None  # not seeded, not updated
        assert bank.edge("memory_access", "fusion").stats.count == 1


def test_recording_is_idempotent_per_run_task_step(bank, make_step):
    assert bank.record_step(make_step(3, prefix=["memory_access"]), config=RULE)
    before = bank.export_json()
    assert not bank.record_step(make_step(3, prefix=["memory_access"], reward=1.0), config=RULE)
    assert bank.export_json() == before
    assert bank.record_step(make_step(3, run="other"), config=RULE)
    assert bank.record_steps([make_step(3), make_step(4), make_step(4)], config=RULE) == 1


def test_evidence_keeps_the_best_positive_and_latest_negative(bank, make_step):
    rewards = [0.1, 0.9, 0.3, 0.7, 0.5]
    for i, r in enumerate(rewards):
        bank.record_step(make_step(i, reward=r, lesson=f"gain {r}"), config=RULE)
    for i in range(5, 10):
        bank.record_step(
            make_step(i, status=Status.INCORRECT, reward=-0.5, error=f"err {i}"), config=RULE
        )
    evidence = bank.evidence("fusion.elementwise_chain_fusion")
    positive = [e.reward for e in evidence if e.polarity == "positive"]
    negative = sorted(e.step for e in evidence if e.polarity == "negative")
    assert positive == [0.9, 0.7, 0.5]
    assert negative == [7, 8, 9]
    assert bank.local("fusion.elementwise_chain_fusion").stats.tries == 10  # aggregates keep all


def test_long_error_excerpts_are_clipped(bank, make_step):
    bank.record_step(
        make_step(0, status=Status.RUNTIME_ERROR, reward=-0.6, error="x" * 5000), config=RULE
    )
    (ev,) = bank.evidence("fusion.elementwise_chain_fusion")
    assert len(ev.error_excerpt) == EXCERPT_LIMIT and ev.error_excerpt.endswith("...")


def test_invalid_steps_are_rejected_without_change(bank, make_step):
    with pytest.raises(ValueError, match="unknown direction"):
        bank.record_step(make_step(0, direction="teleport", local=None), config=RULE)
    with pytest.raises(ValueError, match="unknown direction"):
        bank.record_step(make_step(0, prefix=["teleport"]), config=RULE)
    with pytest.raises(ValueError, match="not a strategy of"):
        bank.record_step(make_step(0, direction="precision"), config=RULE)
    with pytest.raises(ValueError, match="non-negative weights"):
        bank.record_step(make_step(0, prefix=["fusion"]), weights=[0.5, 0.5], config=RULE)
    assert bank.step_count() == 0


def test_flat_direction_resolves_to_the_strategy_parent(bank, make_step):
    bank.record_step(
        make_step(0, direction=Direction.ANY, local="precision.tensor_core_dot"), config=RULE
    )
    assert bank.direction("precision").stats.tries == 1


def test_zero_weights_leave_edges_alone(bank, make_step):
    bank.record_step(
        make_step(0, prefix=["precision", "memory_access"]), weights=[0.0, 1.0], config=RULE
    )
    assert bank.edge("precision", "fusion").stats.count == 0
    assert bank.edge("memory_access", "fusion").stats.weight_sum == 1.0


steps_strategy = st.lists(
    st.tuples(
        st.integers(0, 12),  # step index: repeats exercise idempotency
        st.lists(st.sampled_from(DIRECTIONS), max_size=4),
        st.sampled_from(DIRECTIONS),
        st.sampled_from(list(Status)),
        st.floats(-1, 1, allow_nan=False),
    ),
    max_size=30,
)


@settings(max_examples=40, deadline=None)
@given(steps_strategy)
def test_ledger_and_statistics_stay_consistent(steps):
    config = PolicyConfig()
    with MemoryBank.in_memory() as bank:
        seen: dict[int, tuple] = {}
        for index, prefix, direction, status, r in steps:
            record = _record(index, prefix, direction, status, r)
            assert bank.record_step(record, config=config) == (index not in seen)
            seen.setdefault(index, (prefix[-config.K :], direction, r))
        tries = {d.id: d.stats.tries for d in bank.directions()}
        assert sum(tries.values()) == bank.step_count() == len(seen)
        expected_weight: dict[tuple[str, str], float] = {}
        for prefix, direction, _ in seen.values():
            for src, w in zip(
                reversed(prefix), position_weights(len(prefix), config.tau_pos), strict=True
            ):
                key = (src, direction)
                expected_weight[key] = expected_weight.get(key, 0.0) + w
        for (src, dst), weight in expected_weight.items():
            assert bank.edge(src, dst).stats.weight_sum == pytest.approx(weight)
        for node in bank.directions():
            rewards = [r for _, d, r in seen.values() if d == node.id]
            if rewards:
                assert min(rewards) - 1e-9 <= node.stats.ema <= max(rewards) + 1e-9


def _record(index, prefix, direction, status, r):
    from htam.memory import StepRecord

    return StepRecord("run", "task", "sig", index, prefix, direction, None, status, None, None, r)
