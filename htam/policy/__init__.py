"""The transition-aware direction policy (DESIGN §1) and its ablations.

Nothing here imports ``htam.memory`` at runtime: the memory imports this package's config,
features and scoring, and a runtime import back would be a cycle.
"""

from htam.policy.config import PolicyConfig, position_weights, uniform_weights
from htam.policy.features import FLAT_DIRECTION, OP_FAMILIES, StateFeatures, Trigger
from htam.policy.policies import METHODS, Decision, DirectionPolicy, make_policy, step_rng
from htam.policy.reward import reward, timing_noise

__all__ = [
    "FLAT_DIRECTION",
    "METHODS",
    "OP_FAMILIES",
    "Decision",
    "DirectionPolicy",
    "PolicyConfig",
    "StateFeatures",
    "Trigger",
    "make_policy",
    "position_weights",
    "reward",
    "step_rng",
    "timing_noise",
    "uniform_weights",
]
