"""The seam between the loop and whoever writes code: an LLM or the offline template library."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from htam.evaluate.result import EvalResult
from htam.status import Fault
from htam.tasks.task import Task
from htam.vocab import Strategy  # the memory's view of a local node, defined with the vocabulary

__all__ = ["Choice", "Proposal", "ProposalRequest", "Proposer", "Strategy", "Usage"]


@dataclass
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    calls: int = 0
    cached_calls: int = 0

    def add(self, other: Usage) -> None:
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens
        self.cost_usd += other.cost_usd
        self.calls += other.calls
        self.cached_calls += other.cached_calls


@dataclass
class ProposalRequest:
    task: Task
    target: str  # "cuda" | "cpu"
    language: str  # "cuda" | "triton" | "cpp"
    base_code: str | None  # best correct implementation so far; None before the first success
    feedback: EvalResult | None  # feedback on the most recent attempt
    last_code: str | None = None  # the code of the most recent attempt (what feedback is about)
    direction: str | None = None  # chosen global direction id; None for direction-free methods
    strategy: Strategy | None = None  # chosen local strategy
    guidance: str = ""  # rendered memory (direction, strategy, incoming edge) for prompts
    state_summary: str = ""  # rendered state s_t
    step: int = 0
    seed: int = 0
    tried: frozenset[str] = frozenset()  # sources evaluated earlier in this run (not worth again)
    # Asked again because the last proposal repeated the code evaluated at this step; the
    # attempt number keeps a cached reply from answering the same way.
    repeats_step: int | None = None
    repeated_code: str | None = None  # the code of the repeating proposal (shown when asking again)
    attempt: int = 0


@dataclass
class Proposal:
    code: str | None  # complete ModelNew source; None when nothing could be written
    error: str | None = None  # why there is no code, e.g. "no applicable strategy: ..."
    prompt: str = ""
    response: str = ""
    reasoning: str | None = None
    usage: Usage = field(default_factory=Usage)
    # The local strategy the code realizes when the proposer picked one itself (the request held
    # none); the loop records the step under it, so the memory learns what was really done.
    strategy: Strategy | None = None
    # No code because the endpoint failed (unreachable, bad key, no quota): not evidence about a
    # kernel, so the loop keeps it out of the memory and stops when it repeats.
    infrastructure: bool = False
    # No code because this proposer has no way to write any for the task or the strategy (the
    # offline proposer without a template): not evidence about the strategy either, so the
    # memory does not learn from it.
    unsupported: bool = False
    # The task translated as it is, no strategy applied (the offline proposer's first code):
    # it follows no direction, so the loop records the step under none and the memory credits
    # no direction with it.
    baseline: bool = False
    # Whose doing it is that there is no code (htam.status.Fault): the endpoint's (a reply in
    # prose, a refused request, a reply cut at max_tokens) or the proposer's. Never learned.
    fault: Fault | None = None


@dataclass
class Choice:
    strategy: Strategy | None
    rationale: str = ""
    usage: Usage = field(default_factory=Usage)
    prompt: str = ""
    response: str = ""
    infrastructure: bool = False  # the choice fell back because the endpoint failed


class Proposer(Protocol):
    name: str

    def choose_strategy(self, request: ProposalRequest, candidates: list[Strategy]) -> Choice:
        """Rank the candidates (local nodes of the chosen direction) and pick one."""
        ...

    def propose(self, request: ProposalRequest) -> Proposal:
        """Write the next implementation, guided by ``request.strategy``."""
        ...

    def can_propose(self, task: Task) -> bool:
        """False when it can write nothing for ``task`` (every proposal would say why not): the
        loop then spares the reference's timing."""
        ...
