"""One step of the loop as a typed, frozen value: what the run directory writes, what the live
display and the bench read, and what a resumed run replays.

``Step.to_dict`` is the on-disk form (``steps/step_NN.json``): the keys and their order are the
run directory's format, so files written before and after stay byte-compatible.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from htam.evaluate.result import EvalResult
from htam.memory.model import StepRecord
from htam.proposer import Choice, Proposal, Usage


@dataclass(frozen=True)
class ChoiceRecord:
    """The strategy choice as recorded: why, and the exchange with the proposer."""

    rationale: str = ""
    prompt: str = ""
    response: str = ""

    @classmethod
    def of(cls, choice: Choice) -> ChoiceRecord:
        return cls(choice.rationale, choice.prompt, choice.response)


@dataclass(frozen=True)
class ProposalRecord:
    """The proposal as recorded (its code is kept beside the record, in ``step_NN.py``)."""

    prompt: str = ""
    response: str = ""
    reasoning: str | None = None
    error: str | None = None
    baseline: bool = False  # the task translated with no strategy (see Proposal.baseline)
    wrote_code: bool = True  # False: nothing to evaluate (no template, a reply without code)

    @classmethod
    def of(cls, proposal: Proposal) -> ProposalRecord:
        return cls(
            proposal.prompt, proposal.response, proposal.reasoning, proposal.error,
            proposal.baseline, proposal.code is not None,
        )  # fmt: skip


@dataclass(frozen=True)
class Step:
    step: int
    method: str
    direction: str  # a global direction id, or a sentinel of htam.vocab.Direction
    strategy: str | None
    prefix: list[str]  # the directions the decision was conditioned on, most recent last
    repair_of: int | None  # the failed step whose code this one repaired
    decision: dict[str, Any]  # the guide's breakdown of its decision (JSON-ready)
    choice: ChoiceRecord
    proposal: ProposalRecord
    feedback: EvalResult
    reward: float
    usage: Usage
    new_best: bool
    repeats_step: int | None  # the earlier step whose code this proposal repeated
    repeated_proposals: int
    best_speedup: float
    memory_updated: bool
    wall_s: float
    state_text: str
    memory_record: StepRecord
    # What this step found to have nothing new left for the code the loop continues from (a
    # resumed run replays them, so it leaves them out as the uninterrupted run did).
    exhausted_strategies: list[str] = field(default_factory=list)
    exhausted_directions: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "method": self.method,
            "direction": self.direction,
            "strategy": self.strategy,
            "prefix": self.prefix,
            "repair_of": self.repair_of,
            "decision": self.decision,
            "choice": asdict(self.choice),
            "proposal": asdict(self.proposal),
            "feedback": self.feedback.to_dict(),
            "reward": self.reward,
            "usage": asdict(self.usage),
            "new_best": self.new_best,
            "repeats_step": self.repeats_step,
            "repeated_proposals": self.repeated_proposals,
            "best_speedup": self.best_speedup,
            "memory_updated": self.memory_updated,
            "wall_s": self.wall_s,
            "state_text": self.state_text,
            "memory_record": self.memory_record.to_dict(),
            "exhausted_strategies": self.exhausted_strategies,
            "exhausted_directions": self.exhausted_directions,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Step:
        """A step read back from ``steps/step_NN.json`` (older files lack the later keys)."""
        return cls(
            step=data["step"],
            method=data.get("method", ""),
            direction=data["direction"],
            strategy=data["strategy"],
            prefix=list(data.get("prefix", [])),
            repair_of=data.get("repair_of"),
            decision=data.get("decision", {}),
            choice=ChoiceRecord(**data.get("choice", {})),
            proposal=ProposalRecord(**data.get("proposal", {})),
            feedback=EvalResult.from_dict(data["feedback"]),
            reward=data.get("reward", 0.0),
            usage=Usage(**data["usage"]),
            new_best=data.get("new_best", False),
            repeats_step=data.get("repeats_step"),
            repeated_proposals=data.get("repeated_proposals", 0),
            best_speedup=data.get("best_speedup", 0.0),
            memory_updated=data.get("memory_updated", False),
            wall_s=data.get("wall_s", 0.0),
            state_text=data["state_text"],
            memory_record=StepRecord.from_dict(data["memory_record"]),
            exhausted_strategies=list(data.get("exhausted_strategies", [])),
            exhausted_directions=list(data.get("exhausted_directions", [])),
        )
