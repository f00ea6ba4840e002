"""What the policy learns from one step: the value V(g) and the LMS fit of the prefix edges.

The prefix part of the score (htam.policy.scoring) predicts ``V(g) + sum_k w_k * fit(p_k -> g)``
for a step that took direction g after the prefix p. After the step, every prefix edge moves by
``w_k * error * step`` with ``error`` the reward minus that prediction and
``step = max(edge_lr, 1 / (W + shrink))``, W the edge's total weight including this update. So a
lone edge starts as a shrunk running mean and later tracks a moving policy, and an older prefix
element only gets the credit the more recent ones do not already explain. (A plain w_k-weighted
mean of rewards per edge would credit a -> c with the reward of a good b -> c in the path a, b, c,
and the policy would keep trying a bad a -> c.)

These are the rule's numbers; :class:`htam.policy.policy_config.PolicyConfig` applies them with
its constants, and the memory (htam.memory.updates) persists what they return.
"""

from __future__ import annotations

from collections.abc import Iterable


def shrunk_value(tries: int, reward_sum: float, shrink: float) -> float:
    """V(g): mean reward shrunk toward 0 by ``shrink`` pseudo-tries."""
    return reward_sum / (tries + shrink) if tries + shrink > 0 else 0.0


def prediction_error(
    reward: float, value: float, weighted_fits: Iterable[tuple[float, float]]
) -> float:
    """The reward minus what V(g) and the prefix edges' (weight, fit) pairs predicted."""
    return reward - (value + sum(w * fit for w, fit in weighted_fits))


def fitted(
    fit: float, weight_sum: float, weight: float, error: float, edge_lr: float, shrink: float
) -> float:
    """An edge's new fit after an update of ``weight``; ``weight_sum`` is its total before it."""
    return fit + weight * error * max(edge_lr, 1.0 / (weight_sum + weight + shrink))
