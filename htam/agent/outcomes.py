"""What a step's outcome is and whose doing (htam.status's fault taxonomy): the result of a step
where no candidate was judged, the evaluator's and the machine's faults retried, and the noise
band a measurement carries (what the reward and a new best must clear)."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from htam.agent.state import comparable_times
from htam.evaluate.result import EvalResult
from htam.policy import PolicyConfig, reward
from htam.policy.shares import term_shares
from htam.proposer import Proposal
from htam.status import Fault, Status
from htam.tasks.families import op_family

# "unsupported module Conv2d (conv)", "unsupported operation cumsum (x)", "... row operation ..."
_UNSUPPORTED = re.compile(r"unsupported (?:module|operation|row operation|selection) '?(\w+)")
# "input x is bfloat16; only float32 ...", "its kernels would get float64 tensors: the templates
# are float32": what is missing is a dtype, not an operator family
_DTYPE = re.compile(
    r"(?:is|produces|would get) (\w+)(?: tensors)?[;:] (?:only|the templates are) float32"
)
if TYPE_CHECKING:
    from htam.agent.state import Progress

CLOCK_FLAG = "clock resolution"  # the judge's flag: calls within 2x of what its clock resolves
CLOCK_NOISE = 1.0  # such a time cannot tell apart kernels within 2x of each other


# Finer names than htam.tasks.families for what the templates lack (its "other" says little).
_FINER = (("pool", "pooling"), ("cum", "scan"), ("loss", "loss"), ("einsum", "einsum"))


def missing_family(error: str, task_families: list[str]) -> str:
    """The op family the offline proposer has no template for: that of the op its refusal
    names (with the op), else the task's first family (the bench counts such steps apart)."""
    if dtype := _DTYPE.search(error):
        return f"{dtype.group(1)} inputs"
    match = _UNSUPPORTED.search(error)
    if match is None:
        return task_families[0] if task_families else "other"
    op = match.group(1)
    finer = [name for key, name in _FINER if key in op.lower()]
    return f"{(finer or [op_family(op) or 'other'])[0]} ({op})"


def unjudged(proposal: Proposal, task_families: list[str]) -> EvalResult:
    """The result of a step whose proposer wrote no code: no candidate was judged."""
    why = proposal.error or "the reply held no code"
    if proposal.unsupported:
        family = missing_family(why, task_families)
        return EvalResult(
            Status.NO_STRATEGY,
            messages=[f"{why} (missing family: {family})"],
            fault=Fault.PROPOSER,
        )
    return EvalResult(Status.NO_CODE, messages=[why], fault=proposal.fault or Fault.ENDPOINT)


def repeated(step: int) -> EvalResult:
    return EvalResult(
        Status.REPEAT,
        messages=[f"the same code as step {step}: not evaluated again"],
        fault=Fault.PROPOSER,
    )


def needs_retry(result: EvalResult) -> bool:
    """An outcome that may not be the kernel's doing and is judged again once: a lost
    evaluation (the evaluator already replaced its fork server), a fault of the machine, and a
    timeout (a kernel that hangs hangs again; one slowed by the machine's load seldom does)."""
    return result.cause in (Fault.EVALUATOR, Fault.MACHINE) or result.status is Status.TIMEOUT


def after_retry(first: EvalResult, second: EvalResult) -> EvalResult:
    """The outcome kept after judging a candidate twice (see needs_retry); what happened to the
    first is said last in its messages."""
    if first.status is Status.TIMEOUT and second.status is Status.TIMEOUT:
        return second  # it hangs every time: the kernel's doing, learned
    if first.cause in (Fault.EVALUATOR, Fault.MACHINE):
        lost = " ".join((first.messages or [str(first.status)])[0].split())[:200]
        second = replace(second, messages=[*second.messages, f"judged again: {lost}"])
    if second.status is Status.TIMEOUT and second.cause is Fault.KERNEL:
        # timed out once of two tries after another fault: not shown to be the kernel's
        second.fault = Fault.MACHINE
        second.messages = [*second.messages, "timed out once of two tries: the machine's load"]
    return second


# How the judge names a call on inputs it drew in secret for this evaluation (a random shift and
# scale, outliers planted at random places: htam.evaluate.judge.shifted.Shifter.inputs).
DRAWN_INPUTS = "scaled and shifted inputs"


def on_drawn_inputs(result: EvalResult) -> bool:
    """An ``incorrect`` verdict reached on inputs the judge drew in secret: whether another
    draw fails too is what says it is the kernel's (see after_redraw)."""
    return (
        result.status is Status.INCORRECT
        and result.cause is Fault.KERNEL
        and any(DRAWN_INPUTS in m for m in result.messages[:1])
    )


def after_redraw(first: EvalResult, second: EvalResult) -> EvalResult:
    """The outcome kept after judging on fresh draws a candidate found incorrect on drawn
    inputs. Failing again, it is the kernel's: learned. Passing, the verdict depended on the
    draw (a TF32 GEMM one element off against one planted outlier, once in 22 runs): the first
    verdict stands, so the candidate is not used, but nothing is learned of the strategy. Not
    judged again (the evaluator lost it), the draw is not shown to be the kernel's either."""
    if second.cause is Fault.KERNEL and not second.correct:
        return first
    again = "it passed" if second.correct else f"it was not judged ({second.status})"
    why = (
        f"incorrect only on inputs drawn in secret; judged again on fresh draws, {again}: "
        "a verdict of the draw teaches nothing of the strategy (the candidate is not used)"
    )
    return replace(first, fault=Fault.DRAW, messages=[why, *first.messages])


def noise_of(result: EvalResult, best: EvalResult | None, ref_ms: float | None) -> float:
    """The relative noise of comparing ``result`` with ``best`` (the reference before the first
    success), from what the evaluator measured: each side's half interquartile range, the
    reference's drift between the times compared (reference_drift), and the evaluator's flags
    (a time within the clock's resolution)."""
    values = [reference_drift(result, best, ref_ms)]
    for side in (result, best):
        if side is None:
            continue
        if side.timing and side.timing.median_ms > 0:
            values.append(side.timing.iqr_ms / (2.0 * side.timing.median_ms))
        if any(CLOCK_FLAG in flag for flag in side.flags):
            values.append(CLOCK_NOISE)
    return max(values)


def reference_drift(result: EvalResult, best: EvalResult | None, ref_ms: float | None) -> float:
    """How far the reference's time moved between the two times compared (comparable_times).
    In paired units (speedups) that is between the references timed beside each side: a
    reference slower beside both candidates alike (a CPU runner's overhead: 15x on a 0.01 ms
    operator) moves neither speedup against the other, and taken as noise it kept a 7x faster
    candidate from ever becoming the best. Before the first success the bar is the reference
    beside the candidate itself: no drift. In milliseconds, each side's from the reference
    alone."""
    if result.speedup and (best is None or best.speedup):
        if best is None or not best.ref_runtime_ms or not result.ref_runtime_ms:
            return 0.0
        return _apart(result.ref_runtime_ms, best.ref_runtime_ms)
    sides = [s.ref_runtime_ms for s in (result, best) if s is not None and s.ref_runtime_ms]
    return max((_apart(ms, ref_ms) for ms in sides if ref_ms), default=0.0)


def _apart(a: float, b: float) -> float:
    return max(a / b, b / a) - 1.0


def meaningful(result: EvalResult) -> bool:
    """Whether the result's time says anything (not under the Triton interpreter)."""
    return result.timing is None or result.timing.meaningful


def new_best_band(result: EvalResult, progress: Progress, min_gain: float) -> float:
    """The relative gain a correct result must show over the best to be a new best: the
    measurement's noise, at least ``min_gain``; none before the first success, and no gain is
    enough under no measurement (the interpreter's times)."""
    if progress.best_result is None:
        return 0.0
    if not meaningful(result):
        return float("inf")  # a time that says nothing moves nothing
    return max(noise_of(result, progress.best_result, progress.ref_ms), min_gain)


def step_reward(result: EvalResult, progress: Progress, config: PolicyConfig) -> float:
    """The step's reward (htam.policy.reward) in one unit on both sides (comparable_times),
    within the measured noise; a correct time that says nothing is a tie."""
    if not result.cause.learned:
        return 0.0  # not the kernel's doing: nothing to reward, and nothing is learned
    before, new = comparable_times(result, progress.best_result, progress.ref_ms)
    new = new if result.correct and result.runtime_ms else None
    if result.correct and not meaningful(result):
        before = new
    noise = noise_of(result, progress.best_result, progress.ref_ms)
    return reward(result.status, before, new, config, noise)


def prefix_share(breakdown: dict) -> float | None:
    """The transition term's share of a decision (htam.policy.shares), None if unscored."""
    shares = term_shares(breakdown)
    return None if shares is None else shares["transition"]
