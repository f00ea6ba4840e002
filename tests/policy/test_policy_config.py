"""The reward and the position weights: defined once, in PolicyConfig."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from htam.policy import PolicyConfig, position_weights, reward, timing_noise, uniform_weights
from htam.status import Status


def test_reward_of_a_correct_step_is_the_clipped_log2_speed_ratio_above_the_noise():
    config = PolicyConfig()
    assert reward(Status.OK, 2.0, 1.0, config) == 1.0  # twice as fast
    assert reward(Status.OK, 1.0, 1.0, config) == 0.0
    assert reward(Status.OK, 1.0, 0.8, config) == pytest.approx(math.log2(1.25))
    assert reward(Status.OK, 10.0, 1.0, config) == 1.0
    assert reward(Status.OK, 10.0, 1.0, PolicyConfig(reward_clip=3.0)) == pytest.approx(3.0)
    # 1% faster is timing noise (min_gain 3%), and so is 8% under a measured 10% noise
    assert reward(Status.OK, 1.0, 0.99, config) == 0.0
    assert reward(Status.OK, 1.0, 1 / 1.08, config, noise=0.10) == 0.0
    assert reward(Status.OK, 1.0, 1 / 1.12, config, noise=0.10) == pytest.approx(math.log2(1.12))


def test_a_slower_correct_step_scores_in_the_slow_band_not_like_a_cheat():
    config = PolicyConfig()
    assert reward(Status.OK, 1.0, 2.0, config) == pytest.approx(-0.2)  # 0.5x: -0.4 * (1 - 0.5)
    assert reward(Status.OK, 1.0, 4.0, config) == pytest.approx(-0.3)
    assert reward(Status.OK, 1.0, 1e6, config) > -0.4 > config.reward_incorrect


@given(
    st.floats(1e-3, 1e3),
    st.floats(1e-3, 1e3),
    st.floats(1e-3, 1e3),
    st.floats(0, 0.5),
    st.sampled_from([s for s in Status if s.judged and s is not Status.OK]),
)
def test_reward_is_monotone_in_quality(before, t1, t2, noise, failure):
    config = PolicyConfig()
    correct = reward(Status.OK, before, t1, config, noise)
    assert correct > reward(failure, before, None, config)
    if failure is not Status.REJECTED:
        assert reward(failure, before, None, config) > reward(Status.REJECTED, None, None, config)
    # faster never earns less
    fast, slow = min(t1, t2), max(t1, t2)
    assert reward(Status.OK, before, fast, config, noise) >= reward(
        Status.OK, before, slow, config, noise
    )


@pytest.mark.parametrize(
    ("status", "value"),
    [
        (Status.INCORRECT, -0.5),
        (Status.RUNTIME_ERROR, -0.6),
        (Status.COMPILE_ERROR, -0.6),
        (Status.TIMEOUT, -0.8),
        (Status.REJECTED, -1.0),
    ],
)
def test_failures_earn_fixed_values_from_the_config(status, value):
    assert reward(status, 1.0, None, PolicyConfig()) == value
    custom = PolicyConfig(reward_slow_floor=0.05, reward_timeout=-0.1, reward_rejected=-0.6,
                          reward_incorrect=-0.3, reward_compile_error=-0.4,
                          reward_runtime_error=-0.5)  # fmt: skip
    assert reward(status, None, None, custom) in (-0.1, -0.6, -0.3, -0.4, -0.5)


def test_config_refuses_rewards_that_put_a_failure_above_a_correct_step():
    with pytest.raises(ValidationError, match="below -reward_slow_floor"):
        PolicyConfig(reward_incorrect=-0.3)  # slow floor 0.4: a 0.2x kernel would score below
    with pytest.raises(ValidationError, match="above reward_rejected"):
        PolicyConfig(reward_timeout=-1.2)


def test_timing_noise_is_the_larger_half_iqr_over_the_median():
    assert timing_noise((0.2, 10.0), (1.0, 10.0), None) == pytest.approx(0.05)
    assert timing_noise(None) == 0.0


def test_a_correct_step_needs_both_times():
    with pytest.raises(ValueError, match="positive times"):
        reward(Status.OK, None, 1.0, PolicyConfig())
    with pytest.raises(ValueError, match="positive times"):
        reward(Status.OK, 1.0, 0.0, PolicyConfig())


def test_config_is_validated_and_frozen():
    for bad in ({"K": 0}, {"T_g": 0}, {"tau_pos": -1}, {"reward_timeout": 0.5}, {"typo": 1}):
        with pytest.raises(ValidationError):
            PolicyConfig(**bad)
    with pytest.raises(ValidationError):
        PolicyConfig().K = 5
    assert PolicyConfig().T == 6


@given(st.integers(1, 12), st.floats(0.05, 50))
def test_position_weights_sum_to_one_and_favour_recent_steps(n, tau):
    w = position_weights(n, tau)
    assert len(w) == n and math.isclose(sum(w), 1.0, rel_tol=1e-12)
    assert all(a >= b for a, b in zip(w, w[1:], strict=False))
    assert all(a / b == pytest.approx(math.exp(1 / tau)) for a, b in zip(w, w[1:], strict=False))
    assert math.isclose(sum(uniform_weights(n)), 1.0) and len(set(uniform_weights(n))) == 1


def test_empty_prefix_has_no_weights():
    assert position_weights(0, 1.0) == [] == uniform_weights(0)


@pytest.mark.parametrize("status", [s for s in Status if not s.judged])
def test_a_step_where_nothing_was_judged_earns_nothing(status):
    # no code, a repeat, no strategy, a lost evaluation: not the kernel's doing, no reward
    assert reward(status, 1.0, None, PolicyConfig()) == 0.0
