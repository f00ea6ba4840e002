"""Asking the proposer for the next candidate: never the same code twice in a run, and a failing
endpoint raised, not recorded."""

from __future__ import annotations

from htam.agent.state import Progress, normalized
from htam.proposer import Proposal, ProposalRequest, Proposer, Usage


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
