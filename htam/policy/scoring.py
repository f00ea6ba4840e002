"""The transition-aware direction score of DESIGN §1, term by term.

    score(g) = sum_k w_k * U~(p_{t-k+1} -> g) + lam * V(g) + a_g * prior(g | s_t) + c * sqrt(ln N / (1 + n_g))
    a_g      = prior_tries / (prior_tries + n_g)   (1 when prior_tries is None)
    pi(g)    = softmax(score / T_g)

``V(g)`` is g's mean reward shrunk toward 0 by ``value_shrink`` pseudo-tries. ``U~(p -> g)``
follows ``PolicyConfig.edge_rule``:

- ``lms`` (default): ``V(g) + fit(p -> g)``, the edge's learned advantage over V(g), fitted so
  that the score's prefix part predicts the reward (htam.policy.fitting computes each update,
  htam.memory.updates persists it);
  an edge starts at its seed prior and, while it has few observations, stays near V(g) + prior.
- ``mean`` (the literal rule of the method): the w-weighted mean reward observed on the edge,
  shrunk toward ``V(g) + prior`` by ``shrink`` pseudo-observations.

This module works on plain numbers and the graph's data (htam.memory.model); htam.memory never
imports htam.policy, which keeps the two packages free of import cycles.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from htam.memory.model import EdgeView
from htam.memory.triggers import StateFeatures, Trigger, trigger_prior
from htam.policy.fitting import shrunk_value
from htam.policy.policy_config import PolicyConfig

if TYPE_CHECKING:
    from htam.memory.store import MemoryBank


@dataclass
class DirectionView:
    """What the score needs of one global node (static parts cached by the policy)."""

    id: str
    tries: int
    reward_sum: float
    triggers: list[Trigger] = field(default_factory=list)
    families: frozenset[str] = frozenset()  # union of the op families of its local strategies


_NO_EDGE = EdgeView()


def edge_utility(edge: EdgeView, value: float, config: PolicyConfig) -> float:
    """U~(p -> g) under ``config.edge_rule`` (see the module docstring); ``value`` is V(g)."""
    if config.edge_rule == "mean":
        anchor = value + edge.prior
        total = edge.weight_sum + config.shrink
        return (edge.reward_wsum + config.shrink * anchor) / total if total > 0 else anchor
    return value + edge.fit


def edge_utilities(bank: MemoryBank, config: PolicyConfig) -> dict[tuple[str, str], float]:
    """U~(src -> dst) = V(dst) + fit of every stored edge (the 'lms' rule; for show and plot)."""
    values = {
        g.id: shrunk_value(g.stats.tries, g.stats.reward_sum, config.value_shrink)
        for g in bank.directions()
    }
    return {(e.src, e.dst): values[e.dst] + e.stats.fit for e in bank.edges()}


def prior(
    view: DirectionView, state: StateFeatures, config: PolicyConfig
) -> tuple[float, list[str]]:
    """prior(g | s_t): matching seed triggers, minus a penalty when no local suits the ops."""
    total, reasons = trigger_prior(view.triggers, state)
    if state.op_families and not view.families.intersection(state.op_families):
        total -= config.off_family_penalty
        reasons.append(f"no strategy for {', '.join(state.op_families)}")
    return total, reasons


def softmax(scores: dict[str, float], temperature: float) -> dict[str, float]:
    top = max(scores.values())
    raw = {key: math.exp((value - top) / temperature) for key, value in scores.items()}
    total = sum(raw.values())
    return {key: value / total for key, value in raw.items()}


def score_terms(
    views: list[DirectionView],
    edges: dict[tuple[str, str], EdgeView],
    prefix: list[str],
    weights: list[float],
    priors: dict[str, tuple[float, list[str]]],
    config: PolicyConfig,
) -> dict[str, dict]:
    """Every term of every direction's score; ``weights`` align with ``prefix`` (recent last).

    ``priors`` holds prior(g | s_t) and its reasons per direction (see :func:`prior`).
    """
    total_tries = sum(v.tries for v in views)
    log_n = math.log(total_tries) if total_tries > 1 else 0.0
    terms: dict[str, dict] = {}
    for view in views:
        value = shrunk_value(view.tries, view.reward_sum, config.value_shrink)
        prefix_terms, prefix_sum = [], 0.0
        for position, (src, weight) in enumerate(
            zip(reversed(prefix), reversed(weights), strict=True), 1
        ):
            edge = edges.get((src, view.id), _NO_EDGE)
            utility = edge_utility(edge, value, config)
            prefix_sum += weight * utility
            prefix_terms.append(
                {
                    "position": position,
                    "src": src,
                    "weight": weight,
                    "utility": utility,
                    "advantage": utility - value,
                    "observed": edge.observed,
                    "observations": edge.count,
                    "contribution": weight * utility,
                }
            )
        prior_value, reasons = priors[view.id]
        # the prior gives way as evidence on g accrues: full at no tries, half at prior_tries
        if config.prior_tries is not None:
            prior_value *= config.prior_tries / (config.prior_tries + view.tries)
        exploration = config.c * math.sqrt(log_n / (1 + view.tries))
        terms[view.id] = {
            "prefix_terms": prefix_terms,
            "prefix": prefix_sum,
            "value": value,
            "value_term": config.lam * value,
            "prior": prior_value,
            "prior_reasons": list(reasons),
            "exploration": exploration,
            "score": prefix_sum + config.lam * value + prior_value + exploration,
        }
    return terms
