"""The state summary s_t: task analysis, feedback on the current code, and the recent path."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from htam.agent.view import PathStep, StateView, render_state
from htam.evaluate.result import EvalResult
from htam.policy import StateFeatures
from htam.status import NO_CODE
from htam.tasks import Signature
from htam.vocab import BoundKind, Direction

TRACEBACK = "Traceback (most recent call last):"


def failure_line(result: EvalResult) -> str:
    """One line for a failed evaluation: its cause's first line, or of a traceback the last
    (the exception), which is what says what failed."""
    for message in result.messages:
        lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
        if lines and lines[0] == TRACEBACK:
            return lines[-1]
        if lines:
            return lines[0]
    return str(result.status)


@dataclass
class Progress:
    """What the loop knows after some steps (rebuilt step by step on resume)."""

    ref_ms: float | None
    best_code: str | None = None
    best_result: EvalResult | None = None
    last_result: EvalResult | None = None
    last_code: str | None = None
    path: list[PathStep] = field(default_factory=list)
    directions: list[str] = field(default_factory=list)  # global direction of every step
    # Directions of the steps that moved the code the loop continues from (each new best): the
    # path p_t of the method. A failed or slower step leaves the code, so it is no prefix.
    lineage: list[str] = field(default_factory=list)
    curve: list[float] = field(default_factory=list)  # best speedup after each step
    tried: set[str] = field(default_factory=set)  # every source evaluated so far
    seen: dict[str, int] = field(default_factory=dict)  # normalized source -> step evaluated
    duplicates: int = 0  # proposals that repeated evaluated code (asked again, not evaluated)
    # Strategies and directions that only repeated evaluated code when applied to best_code:
    # left out of decisions until a new best changes the code they would be applied to.
    exhausted_strategies: set[str] = field(default_factory=set)
    exhausted_directions: set[str] = field(default_factory=set)
    last_failure: str | None = None  # the first line of the last failed step's cause
    # The prefix's (transition term's) share of each step's decision (htam.policy.shares);
    # None for a step whose direction was not scored (a repair, a flat or uniform decision).
    prefix_shares: list[float | None] = field(default_factory=list)

    @property
    def best_speedup(self) -> float:
        if self.best_result and self.best_result.speedup:
            return self.best_result.speedup
        return 1.0 if self.best_result else 0.0

    def observe(
        self,
        result: EvalResult,
        code: str | None,
        direction: str,
        step: PathStep,
        band: float = 0.0,
    ) -> bool:
        """Take one step's result in; True when it is the new best: correct and faster than
        the best by more than ``band`` (relative: the measurement's noise)."""
        self.last_result, self.last_code = result, code
        if not result.correct:
            self.last_failure = failure_line(result)
        if code is not None:
            self.tried.add(code)
            self.seen.setdefault(normalized(code), len(self.path))
        self.path.append(step)
        self.directions.append(direction)
        better = (
            result.correct
            and result.runtime_ms is not None
            and (self.best_result is None or faster_than(result, self.best_result, band))
        )
        if better:
            self.best_code, self.best_result = code, result
            self.lineage.append(direction)
            self.exhausted_strategies.clear()  # applied to the new code they write new code
            self.exhausted_directions.clear()
        self.curve.append(self.best_speedup)
        return better


def normalized(code: str) -> str:
    """Source without trailing spaces and blank lines: reformatting alone is no new candidate."""
    return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())


def comparable_times(
    new: EvalResult, best: EvalResult | None, ref_ms: float | None
) -> tuple[float | None, float | None]:
    """(time to beat, the new candidate's time) in one unit.

    In units of the reference timed beside each candidate (1 / speedup) when both sides have a
    speedup (before the first success the bar is the reference itself: 1.0): comparable across
    processes, unlike absolute times, which drift between them. Else both in milliseconds (the
    reference's own time before the first success); with nothing to compare against, a tie.
    """
    best_speedup = best.speedup if best else 1.0
    if new.speedup and best_speedup:
        return 1.0 / best_speedup, 1.0 / new.speedup
    before = best.runtime_ms if best else ref_ms
    return (before if before else new.runtime_ms), new.runtime_ms


def faster_than(result: EvalResult, best: EvalResult, band: float = 0.0) -> bool:
    """Faster than ``best`` by more than the relative ``band`` (a noise band)."""
    before, new = comparable_times(result, best, None)
    return new is not None and before is not None and new * (1.0 + band) < before


def step_status(result: EvalResult, wrote_code: bool = True) -> str:
    """A step's bare status: its evaluation's, or "no_code" where the proposer wrote none (no
    template applies; "rejected" would call it a cheat)."""
    if not result.status.judged:
        return str(result.status)  # no_code, no_strategy, repeat, lost
    return str(result.status) if wrote_code else NO_CODE


def outcome_text(result: EvalResult, wrote_code: bool = True) -> str:
    """A step's outcome as its path and the run's summary name it: "ok 1.32x", else its bare
    status (no_code, no_strategy, repeat, lost for a step no candidate was judged in)."""
    if result.status.judged and wrote_code and result.correct and result.speedup:
        return f"ok {result.speedup:.2f}x"
    return step_status(result, wrote_code)


def features(signature: Signature, bound: BoundKind | None, progress: Progress) -> StateFeatures:
    best = progress.best_result
    last = progress.last_result
    return StateFeatures(
        op_families=list(signature.families),
        bound=bound,
        sol_fraction=best.sol_fraction if best else None,
        last_status=last.status if last else None,
        speedup=best.speedup if best else None,
        ops=list(signature.ops),
        elements=max((math.prod(shape) for shape, _ in signature.inputs), default=None),
    )


def summary_text(
    task_id: str,
    signature: Signature,
    bound: BoundKind | None,
    roofline_ms: float | None,
    progress: Progress,
    k: int,
) -> str:
    view = StateView(
        task_id=task_id,
        signature=signature.text,
        shapes=[f"{'x'.join(map(str, shape))} {dtype}" for shape, dtype in signature.inputs],
        flops=signature.flops,
        bytes=signature.bytes,
        bound=bound,
        roofline_ms=roofline_ms,
        feedback=progress.last_result,
        path=progress.path[-k:],
    )
    return render_state(view)


def repair_target(progress: Progress, repairs: int) -> tuple[int, PathStep] | None:
    """(index, step) whose failed code the next step repairs, or None for a fresh decision.

    The repair prompt fixes that step's code, so its outcome belongs to the failed step's
    direction and strategy, not to a newly chosen one; at most ``repairs`` repairs in a row.
    """
    last = progress.last_result
    if repairs <= 0 or last is None or last.correct or progress.last_code is None:
        return None
    if progress.path[-1].repeat:
        return None  # its code was evaluated before: nothing failed here to repair
    if progress.path[-1].direction == Direction.NONE:
        # the operator as written, no direction: none to repair under (a timed-out baseline
        # made every step after it, and every resume, fail on "unknown direction 'none'")
        return None
    chain = 0
    for step in reversed(progress.path):
        if not step.repair:
            break
        chain += 1
    if chain >= repairs:
        return None
    return len(progress.path) - 1, progress.path[-1]
