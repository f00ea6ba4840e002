"""The Hierarchical Transition Graph as data: nodes, edges, evidence, and one recorded step.

Pure data: no scoring and no learning rule lives here (the policy computes, the memory stores);
the trigger language the nodes and edges carry is :mod:`htam.memory.triggers`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from htam.memory.triggers import OP_FAMILIES, Trigger
from htam.status import Status
from htam.vocab import LANGUAGES, Strategy


@dataclass
class NodeStats:
    """Runtime statistics of a global or local node."""

    tries: int = 0
    successes: int = 0  # correct and faster than the best before (reward > 0)
    reward_sum: float = 0.0
    ema: float = 0.0  # trend: exponential moving average of the rewards, in recording order
    status_counts: dict[str, int] = field(default_factory=dict)

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.tries if self.tries else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> NodeStats:
        return cls(**data) if data else cls()


@dataclass
class EdgeStats:
    """Trajectory evidence of a transition: raw count, position-weighted reward sums, outcomes."""

    count: int = 0
    weight_sum: float = 0.0  # sum of the position weights w_k of every update
    reward_wsum: float = 0.0  # sum of w_k * reward
    fit: float = 0.0  # learned advantage over V(dst): U~(src -> dst) = V(dst) + fit
    status_counts: dict[str, int] = field(default_factory=dict)

    @property
    def observed(self) -> float | None:
        """Observed (position-weighted) mean reward; None before any observation."""
        return self.reward_wsum / self.weight_sum if self.weight_sum > 0 else None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> EdgeStats:
        return cls(**data) if data else cls()


@dataclass(slots=True)
class EdgeView:
    """The numbers of one edge the direction score reads (its hot path: one query, no JSON)."""

    fit: float = 0.0  # learned advantage of the transition over V(dst)
    count: int = 0
    weight_sum: float = 0.0
    reward_wsum: float = 0.0
    prior: float = 0.0  # the seed's prior utility (the 'mean' rule shrinks toward V + prior)

    @property
    def observed(self) -> float | None:
        return self.reward_wsum / self.weight_sum if self.weight_sum > 0 else None


@dataclass
class GlobalNode:
    id: str
    title: str
    intent: str
    objectives: list[str] = field(default_factory=list)
    triggers: list[Trigger] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)
    stats: NodeStats = field(default_factory=NodeStats)


@dataclass
class LocalNode:
    id: str  # "<direction>.<name>"
    direction: str
    title: str
    description: str
    pattern: str  # the modification to make, in general terms
    patterns: dict[str, str] = field(default_factory=dict)  # per language: "cuda", "triton"
    checks: list[str] = field(default_factory=list)  # what to verify after applying it
    op_families: list[str] = field(default_factory=list)
    triggers: list[Trigger] = field(default_factory=list)
    risks: list[str] = field(default_factory=list)
    stats: NodeStats = field(default_factory=NodeStats)

    def to_strategy(self) -> Strategy:
        """The view of this node handed to proposers."""
        return Strategy(
            id=self.id, direction=self.direction, title=self.title, description=self.description
        )

    def pattern_for(self, language: str | None) -> str:
        """The modification pattern for ``language``, else the general one."""
        return self.patterns.get(language or "", "") or self.pattern


@dataclass
class Edge:
    src: str
    dst: str
    applies_when: str = ""
    rationale: str = ""
    risks: list[str] = field(default_factory=list)
    prior_utility: float = 0.0  # seed belief: the fit an edge starts from
    # applies_when made checkable: trigger conditions on StateFeatures (htam.memory.triggers);
    # empty when the text cannot be checked. An edge whose conditions fail does not score.
    when: dict[str, Any] = field(default_factory=dict)
    stats: EdgeStats = field(default_factory=EdgeStats)


@dataclass
class Evidence:
    """One past application of a local strategy, kept when among the best of its polarity."""

    run_id: str
    task_id: str
    step: int
    local_id: str
    polarity: str  # "positive" (correct and faster) or "negative"
    task_signature: str
    status: str
    speedup_before: float | None
    speedup_after: float | None
    reward: float
    error_excerpt: str
    lesson: str
    recorded_at: float
    context: dict[str, str] = field(default_factory=dict)  # target, language, device, size
    scope: str = ""  # whose learning it is (htam.memory.scopes): the target measured on


@dataclass
class StepRecord:
    """One step of the loop, as the memory learns from it."""

    run_id: str
    task_id: str
    task_signature: str
    step: int
    prefix: list[str]  # previous global directions, most recent LAST, length <= K
    direction: str
    local_id: str | None
    status: Status
    speedup_before: float | None
    speedup_after: float | None
    reward: float
    error_excerpt: str = ""
    lesson: str = ""
    # The candidate's digest (task, code, target, language, size): the bank learns from one
    # candidate once, however many runs are served its evaluation from the cache.
    code_digest: str = ""
    # What it was measured on: target, language, device (class), size timed.
    context: dict[str, str] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.run_id, self.task_id, self.step)

    @property
    def success(self) -> bool:
        return Status(self.status).correct and self.reward > 0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = str(self.status)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StepRecord:
        data = dict(data)
        data["status"] = Status(data["status"])
        data["prefix"] = list(data["prefix"])
        return cls(**data)


# Every language a target runs (htam.vocab), in first-seen order: cuda, triton, cpp.
PATTERN_LANGUAGES = tuple(
    dict.fromkeys(str(lang) for langs in LANGUAGES.values() for lang in langs)
)


def check_local(node: LocalNode) -> None:
    """Raise ValueError when a local node breaks the seed contract."""
    if not node.id.startswith(node.direction + "."):
        raise ValueError(f"local {node.id!r} must be named '{node.direction}.<name>'")
    if not node.op_families:
        raise ValueError(f"local {node.id!r} needs at least one op family")
    bad = [f for f in node.op_families if f not in OP_FAMILIES]
    if bad:
        raise ValueError(f"local {node.id!r}: unknown op families {bad}")
    unknown = sorted(set(node.patterns) - set(PATTERN_LANGUAGES))
    if unknown:
        raise ValueError(f"local {node.id!r}: patterns for unknown languages {unknown}")
