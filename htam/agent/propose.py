"""Asking the proposer for the next candidate: never the same code twice in a run, nor a step
spent on a strategy that has nothing new left, and a failing endpoint raised, not recorded."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from htam.agent.guides import Context, MethodGuide
from htam.agent.state import Progress, normalized, repair_target
from htam.agent.view import PathStep
from htam.proposer import Choice, Proposal, ProposalRequest, Proposer, Strategy, Usage
from htam.vocab import Direction

if TYPE_CHECKING:
    from htam.agent.config import OptimizeConfig
    from htam.tasks import Task


class InfrastructureError(Exception):
    """The proposer's endpoint failed (unreachable, bad key, no quota, unknown model): not
    evidence about a kernel. The loop retries the step, then stops the run; nothing of it
    reaches the memory."""

    what = "the LLM endpoint"
    retry = True


class EvaluationError(InfrastructureError):
    """The evaluator could not judge the task (its reference cannot run here): no candidate
    would fare better, so the run stops at once, and nothing of the step is recorded."""

    what = "the evaluator"
    retry = False


def propose_distinct(
    proposer: Proposer, request: ProposalRequest, progress: Progress, retries: int
) -> tuple[Proposal, int | None, Usage]:
    """(proposal, the step whose code it repeats or None, usage of the discarded repeats).

    A proposal repeating code already evaluated in this run is not evaluated again: the proposer
    is asked again (told which step it repeated) up to ``retries`` times."""
    discarded = Usage()
    repeats: int | None = None
    for attempt in range(retries + 1):
        request.attempt = attempt
        proposal = proposer.propose(request)
        if proposal.infrastructure:
            raise InfrastructureError(proposal.error or "the LLM endpoint failed")
        repeats = None if proposal.code is None else progress.seen.get(normalized(proposal.code))
        if repeats is None:
            return proposal, None, discarded
        progress.duplicates += 1
        request.repeats_step, request.repeated_code = repeats, proposal.code
        if attempt < retries:
            discarded.add(proposal.usage)
    return proposal, repeats, discarded


@dataclass
class Attempt:
    """One decision of a step and the proposal it led to."""

    decided: str  # the direction decided (or repaired)
    direction: str  # the direction the proposal is under (a flat decision names none)
    breakdown: dict[str, Any]
    candidates: list[Strategy]
    choice: Choice
    proposal: Proposal
    repeats: int | None  # the step whose code the proposal repeated, None for new code
    extra: Usage  # usage of the repeating proposals asked again

    @property
    def applied(self) -> Strategy | None:
        return self.choice.strategy or self.proposal.strategy


def exhaust(guide: MethodGuide, ctx: Context, att: Attempt) -> tuple[list[str], list[str]]:
    """What an attempt whose proposal only repeated evaluated code shows to be exhausted,
    beyond ``ctx``'s exhausted sets: (strategy ids, direction ids).

    Exhausted: the strategy it applied; the direction decided when the proposer, free to pick
    under it (no strategy chosen), found nothing new; and a direction all of whose candidate
    strategies are exhausted. They stay out of decisions until a new best (Progress.observe).
    """
    applied = att.applied
    strategies = [] if applied is None else [applied.id]
    done = ctx.exhausted_strategies.union(strategies)
    directions = [att.decided] if att.choice.strategy is None else []
    every = replace(ctx, exhausted_strategies=frozenset())
    for direction in dict.fromkeys([att.decided, applied.direction if applied else att.decided]):
        candidates = guide.candidates(direction, every)
        if candidates and all(c.id in done for c in candidates):
            directions.append(direction)
    ignored = ctx.exhausted_directions | {Direction.NONE, Direction.ANY}
    return (
        [s for s in strategies if s not in ctx.exhausted_strategies],
        [d for d in dict.fromkeys(directions) if d not in ignored],
    )


@dataclass
class Asked:
    """What a step asked for and got: its last attempt and what the attempts before it found."""

    last: Attempt
    repair: tuple[int, PathStep] | None  # the failed step the last attempt repairs
    usage: Usage  # of every attempt
    breakdown: dict[str, Any]  # the last decision's, with the attempts skipped before it
    exhausted_strategies: list[str] = field(default_factory=list)
    exhausted_directions: list[str] = field(default_factory=list)


class Asker:
    """Steps 2-4 of the loop up to the code: a direction (or the repaired step's), a local
    strategy among the guide's candidates, and a proposal guided by them and the memory."""

    def __init__(self, proposer: Proposer, guide: MethodGuide, config: OptimizeConfig):
        self.proposer, self.guide, self.config = proposer, guide, config

    def ask(self, task: Task, ctx: Context, progress: Progress) -> Asked:
        """Decide, choose and propose; decide again, leaving out what was found exhausted,
        while the proposal only repeats evaluated code (up to ``config.redecisions`` times)."""
        usage, skipped = Usage(), []
        ctx = replace(
            ctx,
            exhausted_strategies=frozenset(progress.exhausted_strategies),
            exhausted_directions=frozenset(progress.exhausted_directions),
        )
        marked: tuple[list[str], list[str]] = ([], [])
        repair = repair_target(progress, self.guide.repairs)
        for redecision in range(self.config.redecisions + 1):
            att = self._attempt(task, ctx, progress, repair)
            for part in (att.choice.usage, att.extra, att.proposal.usage):
                usage.add(part)
            if att.repeats is None:
                break
            # Only code evaluated before: what it applied has nothing new left for this code.
            # Decide again without it rather than spend the step (seen: three steps went to
            # one exhausted strategy while fusion was never tried).
            new = exhaust(self.guide, ctx, att)
            marked = (marked[0] + new[0], marked[1] + new[1])
            ctx = replace(
                ctx,
                exhausted_strategies=ctx.exhausted_strategies.union(new[0]),
                exhausted_directions=ctx.exhausted_directions.union(new[1]),
            )
            guided = att.decided != Direction.NONE or att.candidates  # the guide can leave it out
            if not (new[0] or new[1]) or not guided or redecision == self.config.redecisions:
                break
            applied = att.applied.id if att.applied else None
            entry = {"direction": att.direction, "strategy": applied, "repeats_step": att.repeats}
            skipped.append(entry)
            repair = None
        breakdown = {**att.breakdown, "skipped": skipped} if skipped else att.breakdown
        return Asked(att, repair, usage, breakdown, *marked)

    def _attempt(self, task: Task, ctx: Context, progress: Progress, repair) -> Attempt:
        if repair is None:
            direction, breakdown = self.guide.decide(ctx)
        else:
            direction = repair[1].direction
            breakdown = {"method": self.config.method, "direction": direction}
            breakdown["repair_of"] = repair[0]
        decided = direction
        request = self._request(task, ctx, progress, direction)
        candidates = self.guide.candidates(direction, ctx)
        request.guidance = self.guide.choice_guidance(direction, candidates, ctx)
        choice = self._choose(request, candidates, repair)
        request.strategy = choice.strategy
        if direction == Direction.ANY and choice.strategy:
            direction = choice.strategy.direction
        request.guidance = self.guide.guidance(direction, choice, ctx)
        proposal, repeats, extra = propose_distinct(
            self.proposer, request, progress, self.config.duplicate_retries
        )
        return Attempt(decided, direction, breakdown, candidates, choice, proposal, repeats, extra)

    def _request(
        self, task: Task, ctx: Context, progress: Progress, direction: str
    ) -> ProposalRequest:
        cfg = self.config
        return ProposalRequest(
            task=task,
            target=cfg.target,
            language=cfg.language,
            base_code=progress.best_code,
            feedback=progress.last_result,
            last_code=progress.last_code,
            direction=None if direction == Direction.NONE else direction,
            state_summary=ctx.state_text,
            step=ctx.step,
            seed=cfg.seed,
            tried=frozenset(progress.tried),
        )

    def _choose(self, request: ProposalRequest, candidates, repair) -> Choice:
        if repair is not None:
            local = repair[1].strategy
            strategy = self.guide.strategy(local) if local else None
            return Choice(strategy, rationale=f"repair of step {repair[0]}")
        if not candidates:
            return Choice(None)
        choice = self.proposer.choose_strategy(request, candidates)
        if choice.infrastructure:
            raise InfrastructureError(choice.rationale.removeprefix("LLM error: "))
        return choice
