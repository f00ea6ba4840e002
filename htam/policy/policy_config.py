"""Every constant of the direction policy, of the memory updates and of the memory in prompts.

The reward (DESIGN §1) is defined in :mod:`htam.policy.reward` from the constants here. This is
the one owner of the constants: the memory keeps none and learns through the update rule a
``PolicyConfig`` is (``htam.memory.updates.UpdateRule``: the prefix weights, the prediction
error and the fitted edge, from :mod:`htam.policy.fitting`).
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from htam.policy.fitting import fitted as fitted_edge
from htam.policy.fitting import prediction_error, shrunk_value
from htam.status import Status


class PolicyConfig(BaseModel):
    """Constants of the transition-aware direction policy and of the memory updates."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    T: int = Field(6, ge=1, description="steps of one optimization (the loop's horizon)")
    K: int = Field(3, ge=1, description="length of the recent prefix scored by transitions")
    tau_pos: float = Field(2.0, gt=0, description="position temperature: w = softmax(-(k-1)/tau)")
    T_g: float = Field(0.25, gt=0, description="softmax temperature of the direction policy")
    lam: float = Field(1.0, ge=0, description="weight of the direction value V(g)")
    c: float = Field(0.2, ge=0, description="exploration weight of sqrt(ln N / (1 + n_g))")
    shrink: float = Field(
        2.0,
        ge=0,
        description="pseudo-observations of an edge's prior: early fit steps are w/(W + shrink)",
    )
    edge_lr: float = Field(
        0.3, gt=0, le=1, description="floor of an edge's fit step, so fits track a moving policy"
    )
    value_shrink: float = Field(
        1.0, ge=0, description="pseudo-tries pulling V(g) (and a local's value) toward 0"
    )
    ema_alpha: float = Field(0.3, gt=0, le=1, description="smoothing of the reward trend (EMA)")
    prior_tries: float | None = Field(
        4.0,
        gt=0,
        description="tries of a direction at which its prior counts half: the prior gives way "
        "as evidence accrues (None: a fixed prior)",
    )
    off_family_penalty: float = Field(
        0.5, ge=0, description="prior penalty for a direction none of whose locals suit the ops"
    )
    evidence_keep: int = Field(
        3, ge=1, description="positive and negative evidence records kept per local strategy"
    )
    edge_rule: Literal["lms", "mean"] = Field(
        "lms",
        description="U~(p -> g): 'lms' = V(g) + advantage fitted to the reward; 'mean' = the "
        "literal rule, the w-weighted mean reward of the edge shrunk toward V(g) + prior",
    )
    repairs: int = Field(
        1, ge=0, description="steps after a failure that repair it under the failed strategy"
    )
    prompt_memory_tokens: int = Field(
        1800, ge=200, description="budget of the memory shown in a strategy-choice prompt"
    )
    reward_clip: float = Field(1.0, gt=0, description="bound of the log2 speed-ratio reward")
    reward_slow_floor: float = Field(
        0.4, gt=0, description="a correct but slower step earns a reward in (-floor, 0]"
    )
    min_gain: float = Field(
        0.03, ge=0, description="relative speed change treated as timing noise (at least)"
    )
    reward_incorrect: float = Field(-0.5, le=0)
    reward_runtime_error: float = Field(-0.6, le=0)
    reward_compile_error: float = Field(-0.6, le=0)
    reward_timeout: float = Field(-0.8, le=0)
    reward_rejected: float = Field(-1.0, le=0, description="cheating or forbidden code")

    @model_validator(mode="after")
    def _correct_above_incorrect(self) -> PolicyConfig:
        # The reward must be monotone in quality: any correct candidate above any failure, and a
        # rejected (cheating) one lowest of all.
        failures = {
            "reward_incorrect": self.reward_incorrect,
            "reward_runtime_error": self.reward_runtime_error,
            "reward_compile_error": self.reward_compile_error,
            "reward_timeout": self.reward_timeout,
        }
        for name, value in failures.items():
            if value >= -self.reward_slow_floor:
                raise ValueError(f"{name} {value} must lie below -reward_slow_floor")
            if value <= self.reward_rejected:
                raise ValueError(f"{name} {value} must lie above reward_rejected")
        return self

    def failure_reward(self, status: Status) -> float:
        values = {
            Status.INCORRECT: self.reward_incorrect,
            Status.RUNTIME_ERROR: self.reward_runtime_error,
            Status.COMPILE_ERROR: self.reward_compile_error,
            Status.TIMEOUT: self.reward_timeout,
            Status.REJECTED: self.reward_rejected,
        }
        return values[Status(status)]

    # -- the update rule the memory applies (htam.memory.updates.UpdateRule) ----------------

    def prefix_weights(self, n: int) -> list[float]:
        """Position weights of an n-element prefix, aligned with it (most recent last)."""
        return list(reversed(position_weights(n, self.tau_pos)))

    def prediction_error(
        self, reward: float, tries: int, reward_sum: float, weighted_fits: list[tuple[float, float]]
    ) -> float:
        """The reward minus V(g) (from g's tries and reward sum) and the prefix edges' fits."""
        value = shrunk_value(tries, reward_sum, self.value_shrink)
        return prediction_error(reward, value, weighted_fits)

    def fitted(self, fit: float, weight_sum: float, weight: float, error: float) -> float:
        """An edge's fit after one update (``weight_sum``: its total weight before it)."""
        return fitted_edge(fit, weight_sum, weight, error, self.edge_lr, self.shrink)


def position_weights(n: int, tau_pos: float) -> list[float]:
    """w_k = softmax_k(-(k-1)/tau_pos) for k = 1..n; k = 1 is the most recent step."""
    if n <= 0:
        return []
    raw = [math.exp(-k / tau_pos) for k in range(n)]
    total = sum(raw)
    return [value / total for value in raw]


def uniform_weights(n: int) -> list[float]:
    """The no-position ablation: every prefix element weighs the same."""
    return [1.0 / n] * n if n > 0 else []
