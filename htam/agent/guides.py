"""Methods as guides: what a method adds to the loop's four steps, behind one protocol.

A guide decides the global direction (step 2), names the candidate local strategies and the
memory shown with them (step 3), writes the memory a proposal is guided by (step 4), and learns
from the step's outcome. The registry of methods is ``htam.vocab.METHODS``; ``make_guide`` maps
a method's spec to its guide:

- ``HTAMGuide``: the transition-aware direction policy over the graph; its ablations
  (no-prefix, no-position, no-update, no-hierarchy, no-local, random) are configurations of it.
- ``FlatGuide``: top-k similar past experiences, every local a candidate, no direction.
- ``NoGuide``: feedback only (refine, oneshot): no direction, no strategies, no memory.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from htam.memory import FlatMemory, MemoryBank, StepRecord, choice_guidance, guidance
from htam.memory.seed import applies
from htam.policy import PolicyConfig, StateFeatures, make_policy, step_rng
from htam.proposer import Choice, Strategy
from htam.vocab import Direction, Guide, MethodSpec


@dataclass(frozen=True)
class Context:
    """What a guide knows of the step it guides."""

    task_id: str
    step: int
    seed: int
    language: str
    prefix: list[str]  # directions of the path the loop continues from, most recent last
    state: StateFeatures
    state_text: str
    # Nothing new left under these for the code the loop continues from (their code was
    # evaluated already in this run): a decision leaves them out (htam.agent.propose.exhaust).
    exhausted_strategies: frozenset[str] = frozenset()
    exhausted_directions: frozenset[str] = frozenset()
    target: str = ""  # where the run's candidates run: evidence from another is not shown


class MethodGuide(Protocol):
    method: str
    repairs: int  # steps after a failure that repair it under the failed strategy (0: none)

    def decide(self, ctx: Context) -> tuple[str, dict[str, Any]]:
        """(direction, JSON-ready breakdown of the decision), not one of
        ``ctx.exhausted_directions`` while another remains."""
        ...

    def candidates(self, direction: str, ctx: Context) -> list[Strategy]:
        """The local strategies the proposer ranks, none of ``ctx.exhausted_strategies``."""
        ...

    def choice_guidance(self, direction: str, candidates: list[Strategy], ctx: Context) -> str:
        """The memory shown with the candidates when the proposer ranks them."""
        ...

    def guidance(self, direction: str, choice: Choice, ctx: Context) -> str:
        """The memory the proposal is guided by."""
        ...

    def strategy(self, local_id: str) -> Strategy:
        """A local strategy by id (a repair re-applies the failed step's strategy)."""
        ...

    def learn(self, record: StepRecord, state_text: str) -> bool:
        """Take the step's outcome in; True when the memory changed."""
        ...


class NoGuide:
    """Feedback-only methods: the proposer sees the state and the feedback, nothing more."""

    repairs = 0

    def __init__(self, method: str):
        self.method = method

    def decide(self, ctx: Context) -> tuple[str, dict[str, Any]]:
        return Direction.NONE, {"method": self.method, "note": "no direction decision"}

    def candidates(self, direction: str, ctx: Context) -> list[Strategy]:
        return []

    def choice_guidance(self, direction: str, candidates: list[Strategy], ctx: Context) -> str:
        return ""

    def guidance(self, direction: str, choice: Choice, ctx: Context) -> str:
        return ""

    def strategy(self, local_id: str) -> Strategy:
        raise KeyError(f"method {self.method} has no strategies ({local_id!r})")

    def learn(self, record: StepRecord, state_text: str) -> bool:
        return False


class FlatGuide(NoGuide):
    """Flat memory retrieval: top-k experiences similar to the state, no hierarchy."""

    def __init__(self, method: str, bank: MemoryBank, k: int):
        super().__init__(method)
        self.bank, self.k = bank, k
        self.flat = FlatMemory(bank)
        # the same curated knowledge htam's graph starts with, as flat records (once per bank)
        self.flat.seed_from(bank)

    def candidates(self, direction: str, ctx: Context) -> list[Strategy]:
        nodes = self.bank.all_locals()
        return [
            n.to_strategy()
            for n in nodes
            if n.id not in ctx.exhausted_strategies and applies(n.id, ctx.target, ctx.language)
        ]

    def choice_guidance(self, direction: str, candidates: list[Strategy], ctx: Context) -> str:
        return self._retrieved(ctx)  # the strategy choice sees the retrieved memory too

    def guidance(self, direction: str, choice: Choice, ctx: Context) -> str:
        return self._retrieved(ctx)

    def _retrieved(self, ctx: Context) -> str:
        hits = self.flat.retrieve(ctx.state_text, self.k)
        return "\n\n".join(f"Past experience:\n{h.text}" for h in hits)

    def strategy(self, local_id: str) -> Strategy:
        return self.bank.local(local_id).to_strategy()

    def learn(self, record: StepRecord, state_text: str) -> bool:
        return self.flat.add(f"{state_text}\nOutcome: {record.lesson}", record)


class HTAMGuide:
    """The method: a direction sampled from the transition-aware policy, its local strategies
    ranked by the proposer with the memory of the direction, its locals and incoming edges."""

    def __init__(self, method: str, bank: MemoryBank, config: PolicyConfig):
        self.method, self.bank, self.config = method, bank, config
        self.policy = make_policy(method, config, bank)
        self.repairs = config.repairs

    def decide(self, ctx: Context) -> tuple[str, dict[str, Any]]:
        rng = step_rng(ctx.seed, ctx.task_id, ctx.step)
        exclude = ctx.exhausted_directions | self._foreign(ctx)
        decision = self.policy.decide(ctx.prefix, ctx.state, rng, exclude)
        return decision.direction, {**decision.breakdown, "direction": decision.direction}

    def _foreign(self, ctx: Context) -> frozenset[str]:
        """Directions none of whose strategies fits the run's target and language (occupancy
        on a CPU): decided, they would leave the proposer a GPU-shaped direction and nothing
        to choose under it."""
        return frozenset(
            g
            for g in self.bank.direction_ids
            if (nodes := self.bank.locals_of(g))
            and not any(applies(n.id, ctx.target, ctx.language) for n in nodes)
        )

    def candidates(self, direction: str, ctx: Context) -> list[Strategy]:
        offered = self.policy.candidates(direction, ctx.state, ctx.exhausted_strategies)
        return [s for s in offered if applies(s.id, ctx.target, ctx.language)]

    def choice_guidance(self, direction: str, candidates: list[Strategy], ctx: Context) -> str:
        if not candidates:
            return ""
        return choice_guidance(
            self.bank,
            direction,
            [c.id for c in candidates],
            ctx.prefix,
            language=ctx.language,
            state=ctx.state,
            budget_tokens=self.config.prompt_memory_tokens,
            target=ctx.target or None,
        )

    def guidance(self, direction: str, choice: Choice, ctx: Context) -> str:
        if direction == Direction.NONE:
            return ""
        local_id = choice.strategy.id if choice.strategy else None
        return guidance(
            self.bank, direction, local_id, ctx.prefix, language=ctx.language,
            target=ctx.target or None,
        )  # fmt: skip

    def strategy(self, local_id: str) -> Strategy:
        return self.bank.local(local_id).to_strategy()

    def learn(self, record: StepRecord, state_text: str) -> bool:
        if record.direction == Direction.NONE:
            return False
        return self.policy.record(record)


def make_guide(
    spec: MethodSpec, bank: MemoryBank | None, config: PolicyConfig, flat_k: int
) -> MethodGuide:
    """The guide of a method; a method that uses memory needs a bank."""
    if spec.guide is Guide.NONE:
        return NoGuide(spec.name)
    if bank is None:
        raise ValueError(f"method {spec.name} needs a memory bank")
    if spec.guide is Guide.FLAT:
        return FlatGuide(spec.name, bank, flat_k)
    return HTAMGuide(spec.name, bank, config)
