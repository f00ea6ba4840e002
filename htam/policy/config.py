"""Every constant of the direction policy and of the memory updates, plus the reward (DESIGN §1).

The reward is defined here once. For a step whose candidate is correct:

    r = clip(log2(t_best_before / t_new), -reward_clip, reward_clip)

where ``t_best_before`` is the best correct time before the step (the reference's time before the
first success) and ``t_new`` the candidate's time: halving the best time earns +1, doubling it -1,
a tie 0. Every failed status earns a fixed negative value from :class:`PolicyConfig`.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field

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
    off_family_penalty: float = Field(
        0.5, ge=0, description="prior penalty for a direction none of whose locals suit the ops"
    )
    evidence_keep: int = Field(
        3, ge=1, description="positive and negative evidence records kept per local strategy"
    )
    reward_clip: float = Field(1.0, gt=0, description="bound of the log2 speed-ratio reward")
    reward_incorrect: float = Field(-0.5, le=0)
    reward_runtime_error: float = Field(-0.6, le=0)
    reward_compile_error: float = Field(-0.6, le=0)
    reward_timeout: float = Field(-0.8, le=0)
    reward_rejected: float = Field(-1.0, le=0, description="cheating or forbidden code")

    def failure_reward(self, status: Status) -> float:
        values = {
            Status.INCORRECT: self.reward_incorrect,
            Status.RUNTIME_ERROR: self.reward_runtime_error,
            Status.COMPILE_ERROR: self.reward_compile_error,
            Status.TIMEOUT: self.reward_timeout,
            Status.REJECTED: self.reward_rejected,
        }
        return values[Status(status)]


def reward(
    status: Status,
    t_best_before_ms: float | None,
    t_new_ms: float | None,
    config: PolicyConfig,
) -> float:
    """The reward of one step (see the module docstring)."""
    status = Status(status)
    if not status.correct:
        return config.failure_reward(status)
    if not t_best_before_ms or not t_new_ms or t_best_before_ms <= 0 or t_new_ms <= 0:
        raise ValueError(
            "a correct step needs positive times: best before "
            f"{t_best_before_ms!r} ms, new {t_new_ms!r} ms"
        )
    ratio = math.log2(t_best_before_ms / t_new_ms)
    return max(-config.reward_clip, min(config.reward_clip, ratio))


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
