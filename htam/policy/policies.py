"""The direction policy of HTAM and its ablations, behind one class and ``make_policy``."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from htam.memory.triggers import StateFeatures, Trigger, trigger_prior
from htam.policy.fitting import shrunk_value
from htam.policy.policy_config import PolicyConfig, position_weights, uniform_weights
from htam.policy.scoring import DirectionView, prior, score_terms, softmax
from htam.vocab import Direction, Guide, method_spec, methods_of

if TYPE_CHECKING:
    from htam.memory.model import LocalNode, StepRecord
    from htam.memory.store import MemoryBank
    from htam.proposer import Strategy

# The methods this policy runs: the registry's (htam.vocab) methods guided by the transition graph.
METHODS = methods_of(Guide.HTAM)


@dataclass
class Decision:
    direction: str
    probabilities: dict[str, float]
    breakdown: dict[str, Any] = field(default_factory=dict)


class DirectionPolicy:
    """Chooses the next global direction from the recent prefix, the state and the memory."""

    def __init__(self, method: str, config: PolicyConfig, bank: MemoryBank):
        spec = method_spec(method)
        if spec.guide is not Guide.HTAM:
            raise ValueError(
                f"method {method!r} has no direction policy: its guide is {spec.guide!s} "
                "(htam.agent.guides; flat retrieves with htam.memory.FlatMemory)"
            )
        self.method = method
        self.variant = spec.variant
        self.config = config
        self.bank = bank
        # Static priors never change inside a bank: read them once.
        locals_ = bank.all_locals()
        self._static = {
            node.id: (
                node.triggers,
                frozenset(
                    f for loc in locals_ if loc.direction == node.id for f in loc.op_families
                ),
            )
            for node in bank.directions()
        }
        self._prior_cache: dict[tuple, dict[str, tuple[float, list[str]]]] = {}
        # Checkable applies-when of the seed's edges (static): an edge whose condition fails in
        # the current state does not score, its target falls back to V(g).
        self._edge_when = {(e.src, e.dst): Trigger(e.when, 0.0, "") for e in bank.edges() if e.when}

    @property
    def updates_memory(self) -> bool:
        return self.variant.updates

    # -- deciding --------------------------------------------------------------------------

    def weights(self, prefix: list[str]) -> tuple[list[str], list[float]]:
        """The prefix this variant scores (most recent last) and its aligned weights."""
        length = self.variant.prefix_len or self.config.K
        used = list(prefix)[-length:]
        if self.variant.positional:
            weights = list(reversed(position_weights(len(used), self.config.tau_pos)))
        else:
            weights = uniform_weights(len(used))
        return used, weights

    def explain(self, prefix: list[str], state: StateFeatures) -> dict[str, Any]:
        """The per-term breakdown of the decision for ``prefix`` and ``state`` (JSON-ready)."""
        if not self.variant.hierarchy:
            return {
                "method": self.method,
                "note": "no direction decision: every local strategy is a candidate",
                "probabilities": {Direction.ANY: 1.0},
            }
        ids = self.bank.direction_ids
        if self.variant.uniform:
            return {
                "method": self.method,
                "note": "directions drawn uniformly",
                "probabilities": {g: 1.0 / len(ids) for g in ids},
            }
        used, weights = self.weights(prefix)
        views = self._views()
        edges = self.bank.edge_views(sorted(set(used)))
        off = sorted(k for k, t in self._edge_when.items() if k in edges and not t.matches(state))
        for key in off:
            del edges[key]
        terms = score_terms(views, edges, used, weights, self._priors(state), self.config)
        probabilities = softmax({g: t["score"] for g, t in terms.items()}, self.config.T_g)
        return {
            "method": self.method,
            "prefix": used,
            "weights": weights,
            "temperature": self.config.T_g,
            "total_tries": sum(v.tries for v in views),
            "directions": terms,
            "edges_not_applicable": [f"{src}->{dst}" for src, dst in off],
            "probabilities": probabilities,
        }

    def decide(
        self,
        prefix: list[str],
        state: StateFeatures,
        rng: random.Random,
        exclude: frozenset[str] = frozenset(),
    ) -> Decision:
        """Sample the next direction from pi(g) with ``rng`` (same seed, same memory: same pick).

        ``exclude``: directions with nothing new left for the run's current code (every
        candidate they lead to was evaluated already). pi is renormalized over the others, so
        the memory still ranks what remains; when nothing remains, nothing is excluded."""
        breakdown = _excluding(self.explain(prefix, state), exclude)
        probabilities = breakdown["probabilities"]
        return Decision(_sample(probabilities, rng), probabilities, breakdown)

    def _priors(self, state: StateFeatures) -> dict[str, tuple[float, list[str]]]:
        """prior(g | s_t) for every direction; static priors, so cached per state."""
        # every feature a trigger reads: the ops and the size too (a key without the size
        # served one size's "tiny tensors" prior to a state timed at another)
        key = (
            tuple(state.op_families), state.bound, state.sol_fraction,
            state.last_status, state.speedup, tuple(state.ops), state.elements,
        )  # fmt: skip
        cached = self._prior_cache.get(key)
        if cached is None:
            if len(self._prior_cache) >= 1024:  # states vary per task: keep the cache bounded
                self._prior_cache.clear()
            cached = {
                g: prior(DirectionView(g, 0, 0.0, *static), state, self.config)
                for g, static in self._static.items()
            }
            self._prior_cache[key] = cached
        return cached

    def _views(self) -> list[DirectionView]:
        stats = self.bank.direction_stats()
        return [DirectionView(g, *stats[g], *self._static[g]) for g in self.bank.direction_ids]

    # -- strategies and learning -----------------------------------------------------------

    def candidates(
        self,
        direction: str,
        state: StateFeatures | None = None,
        exclude: frozenset[str] = frozenset(),
    ) -> list[Strategy]:
        """Local strategies to rank: best learned value (plus trigger prior) first; none of
        ``exclude`` (strategies whose code the run has evaluated already)."""
        if not self.variant.local:
            return []
        if not self.variant.hierarchy or direction == Direction.ANY:
            nodes = self.bank.all_locals()
        else:
            nodes = self.bank.locals_of(direction)
        nodes = [node for node in nodes if node.id not in exclude]
        ranked = sorted(
            enumerate(nodes), key=lambda item: (-self._local_value(item[1], state), item[0])
        )
        return [node.to_strategy() for _, node in ranked]

    def _local_value(self, node: LocalNode, state: StateFeatures | None) -> float:
        value = shrunk_value(node.stats.tries, node.stats.reward_sum, self.config.value_shrink)
        if state is not None:
            value += trigger_prior(node.triggers, state)[0]
        return value

    def record(self, record: StepRecord) -> bool:
        """Update the memory as this variant learns; False if frozen or already recorded."""
        if not self.updates_memory:
            return False
        if record.direction == Direction.ANY and record.local_id is None:
            return False  # a no-hierarchy step without a strategy says nothing about directions
        used, weights = self.weights([d for d in record.prefix if d != Direction.ANY])
        trimmed = type(record)(**{**record.__dict__, "prefix": used})
        return self.bank.record_step(trimmed, weights=weights, config=self.config)


def _excluding(breakdown: dict[str, Any], exclude: frozenset[str]) -> dict[str, Any]:
    """The breakdown with pi renormalized over the directions not in ``exclude`` (the same as
    the softmax of their scores alone); unchanged when that would leave none."""
    probabilities = breakdown["probabilities"]
    excluded = sorted(g for g in probabilities if g in exclude)
    kept = {g: p for g, p in probabilities.items() if g not in exclude}
    if not excluded:
        return breakdown
    if not kept:
        return {**breakdown, "excluded": [], "exhausted": excluded}
    total = sum(kept.values())
    # softmax underflow can leave every kept direction at 0: then uniform among them
    kept = {g: (p / total if total > 0 else 1.0 / len(kept)) for g, p in kept.items()}
    return {**breakdown, "excluded": excluded, "probabilities": kept}


def _sample(probabilities: dict[str, float], rng: random.Random) -> str:
    draw, cumulative = rng.random(), 0.0
    last = next(reversed(probabilities))
    for key, probability in probabilities.items():
        cumulative += probability
        if draw < cumulative:
            return key
    return last  # rounding left the cumulative sum a hair under 1


def step_rng(seed: int, task_id: str, step: int) -> random.Random:
    """The random stream of one decision: per seed, task and step. Keyed by the task too, so the
    random control does not walk the same directions on every task and htam's draws are not
    correlated across tasks."""
    return random.Random(f"{seed}:{task_id}:{step}")


def make_policy(method: str, config: PolicyConfig, bank: MemoryBank) -> DirectionPolicy:
    """The policy of ``method`` (one of METHODS); ``flat`` uses htam.memory.FlatMemory instead."""
    return DirectionPolicy(method, config, bank)
