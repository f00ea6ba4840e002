"""The transition-aware direction policy (DESIGN §1) and its ablations.

The policy decides and computes what to learn; the memory (``htam.memory``, below it) stores
the graph and never imports this package. The state features and triggers are the graph's
trigger language (``htam.memory.triggers``), re-exported here for the policy's callers.
"""

from htam.memory.triggers import OP_FAMILIES, StateFeatures, Trigger
from htam.policy.policies import METHODS, Decision, DirectionPolicy, make_policy, step_rng
from htam.policy.policy_config import PolicyConfig, position_weights, uniform_weights
from htam.policy.reward import reward, timing_noise

__all__ = [
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
