"""The reward of one step (DESIGN §1), defined once; its constants live in PolicyConfig.

For a correct candidate, with ``x = log2(t_best_before / t_new)`` (t_best_before is the best
correct time before the step, the reference's time before the first success):

    x >= log2(1 + noise)   ->  r = min(x, reward_clip)                     an improvement
    |x| < log2(1 + noise)  ->  r = 0                                       a tie: timing noise
    x <= -log2(1 + noise)  ->  r = -reward_slow_floor * (1 - 2**x)         slower, in (-floor, 0)

``noise`` is the relative timing noise of the two measurements, at least ``min_gain``: a re-timed,
near-identical kernel that is 1% faster is a tie, not a success. Every failure earns a fixed value
below ``-reward_slow_floor`` (PolicyConfig validates it), so the reward is monotone in quality:
any correct candidate, however slow, scores above any failed one, and a rejected (cheating)
candidate lowest of all. A correct 0.5x kernel earns -0.2, not the -1 of a cheat.
"""

from __future__ import annotations

import math

from htam.policy.policy_config import PolicyConfig
from htam.status import Status


def reward(
    status: Status,
    t_best_before_ms: float | None,
    t_new_ms: float | None,
    config: PolicyConfig,
    noise: float = 0.0,
) -> float:
    """The reward of one step (see the module docstring); ``noise`` is relative (0.05 = 5%)."""
    status = Status(status)
    if not status.judged:
        return 0.0  # no candidate was judged: nothing to reward (and nothing is learned)
    if not status.correct:
        return config.failure_reward(status)
    if not t_best_before_ms or not t_new_ms or t_best_before_ms <= 0 or t_new_ms <= 0:
        raise ValueError(
            "a correct step needs positive times: best before "
            f"{t_best_before_ms!r} ms, new {t_new_ms!r} ms"
        )
    x = math.log2(t_best_before_ms / t_new_ms)
    band = math.log2(1.0 + max(noise, config.min_gain))
    if x >= band:
        return min(x, config.reward_clip)
    if x > -band:
        return 0.0
    return -config.reward_slow_floor * (1.0 - 2.0**x)


def timing_noise(*spreads: tuple[float, float] | None) -> float:
    """Relative noise of a comparison from each side's (iqr_ms, median_ms): the larger
    half-interquartile range over the median (a side without timing adds nothing)."""
    values = [iqr / (2.0 * median) for iqr, median in filter(None, spreads) if median > 0]
    return max(values, default=0.0)
