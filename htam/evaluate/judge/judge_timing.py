"""What the judge makes of its clock: each runner's calibrated overhead, the timed rounds
(interleaved, on fresh inputs, a second pass where a charge needs bearing out), the attested
timing of both runners from them, and the escape figures that the charge of escaped work
(escape_charge.py) reads.

Each process reports its own time of a call (its events), precise but not to be trusted; the
judge's clock around the call and the hand-over, less the overhead a null call costs, shows how
much of the call ran outside those events (the *hidden* time). The reference's runner (trusted
code) shows what an honest process's hidden time is.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from htam.evaluate import channel, measure
from htam.evaluate.frames import Escape, Job, TimingFigures
from htam.evaluate.judge import escape_charge
from htam.evaluate.judge.escape_charge import charge
from htam.evaluate.judge.runner import Runner
from htam.evaluate.judge.shifted import RNG

_perf = time.perf_counter
NULL_CALLS = 40  # calls that calibrate a runner's overhead (the first 3 are left out)
OUTLIER_MIN_TIMED = 16  # timed calls at least, where outliers are planted (outlier_calls)


def calibrate(runner: Runner, timeout_s: float) -> float:
    """What a call costs beyond its events when it does nothing: measured on null calls before
    the runner has imported any code, so that code cannot inflate it. The least of many, like
    the hidden time it is subtracted from: the first calls of a fresh process are slow, and a
    median of a few (as before) strayed by up to 0.6 ms between the two runners on the H200,
    enough to reject an honest 0.06 ms kernel."""
    over = []
    for _ in range(NULL_CALLS):
        t0 = _perf()
        done = runner.ask(channel.Null(), channel.Done, timeout_s)
        over.append((_perf() - t0) * 1e3 - done.ms)
    return min(over[3:])


def hidden_ms(call: float, handover: float, reported: float, baseline: float, copy: float) -> float:
    """What a call and its hand-over took on the judge's clock beyond the runner's own time by
    its events (``reported``) and the known overheads: a message's round trip (``baseline``)
    each, and the copy of the outputs into the lent slots in the hand-over. The copy is taken
    from the hand-over alone: one that costs less (a solution returning the lent
    slot itself, whose copy is no copy) offsets nothing of the call. (What bounded that
    candidate's shortfall on the H200 is the paired floor of ``figures``.)"""
    return (call - reported - baseline) + max(0.0, handover - baseline - copy)


@dataclass
class Rounds:
    """The timed rounds' samples, in milliseconds: each runner's own time and hidden time per
    call, and the busy probes after the candidate's calls."""

    cand_ms: list[float] = field(default_factory=list)
    hidden: list[float] = field(default_factory=list)
    ref_ms: list[float] = field(default_factory=list)
    ref_hidden: list[float] = field(default_factory=list)
    probes: list[float] = field(default_factory=list)

    def clear(self) -> None:
        for samples in vars(self).values():
            samples.clear()

    def add(self, sample: Sample) -> None:
        self.cand_ms.append(sample.cand_ms)
        self.hidden.append(sample.cand_hidden)
        self.ref_ms.append(sample.ref_ms)
        self.ref_hidden.append(sample.ref_hidden)
        self.probes.append(sample.probe_ms)


@dataclass(frozen=True)
class Sample:
    """One round: each runner's time by its events and its hidden time, and the busy probe
    after the candidate's call."""

    cand_ms: float
    cand_hidden: float
    ref_ms: float
    ref_hidden: float
    probe_ms: float = 0.0


@dataclass(frozen=True)
class Plan:
    """What the timed phase works from: the job's budget and its rules on escaped work, how a
    call is timed here, whether outliers are planted, and the known overheads."""

    job: Job
    method: str  # "cuda_events" or "perf_counter"
    planting: bool = False
    baselines_ms: tuple[float, float] = (0.0, 0.0)  # the candidate's, the reference's
    copy_ms: float = 0.0


@dataclass(frozen=True)
class Timed:
    """The attested timing of both runners and the escape figures; ``retimed``: why the first
    pass was timed again, if it was."""

    timing: TimingFigures
    paired: TimingFigures
    escape: Escape
    retimed: str | None = None


# One round: its index and whether it gets outliers -> its sample.
Play = Callable[[int, bool], Sample]


def figures(rounds: Rounds, plan: Plan) -> tuple[TimingFigures, TimingFigures, Escape]:
    """(timing, paired reference timing, escape figures) of the timed rounds.

    A process's median counts only as far as the judge's clock bears it out: the least of the
    judge's times for the call and hand-over, less the least hidden time of the reference's
    runner and the clock's resolution here, bounds it from below, for both runners alike. A
    timer forged on most calls (honest one call in three, so that the least hidden
    time looked clean) buys nothing, and an honest process descheduled on most of its calls (a
    loaded CPU) is not charged for it. Below the resolution the evaluator flags the time as the
    candidate's own."""
    r, job, method = rounds, plan.job, plan.method
    least = min(r.ref_hidden)
    # The judge's clock resolves no better than an honest process's own spread here.
    slack = max(job.escape_slack_ms, statistics.median(r.ref_hidden) - least)

    # Round by round against the reference's runner: the hidden time each call shows beyond
    # the reference's in the same round, and the doubt of their median.
    diffs = [h - hr for h, hr in zip(r.hidden, r.ref_hidden, strict=True)]
    doubt = escape_charge.paired_doubt(diffs, job.escape_slack_ms, method)

    def attested(own: list[float], seen: list[float], paired: bool) -> TimingFigures:
        """The median as far as the judge's clock bears it out: not below the least of the
        call and hand-over times, less the reference runner's least hidden time and the slack,
        nor (the candidate) below the median of its own times plus what each round's hidden
        time shows beyond the reference's, less the doubt. The spread of hidden times grows
        with the outputs (8 GiB: a slack of milliseconds), and a time reported short by less
        than that passed the first bound (0.45 of a copy off each call, 1.68x
        against the honest 0.96x on the H200); a shortfall on every call moves the second
        by all of it, and what it can still take is the doubt."""
        stats = measure.summary(own, method, job.meaningful)
        floor = min(t + h for t, h in zip(own, seen, strict=True)) - least - slack
        if paired:
            clock = statistics.median(t + d for t, d in zip(own, diffs, strict=True))
            floor = max(floor, clock - doubt)
        stats["median_ms"] = max(stats["median_ms"], floor)
        return TimingFigures(**stats)

    clock_ms = statistics.median(c + h for c, h in zip(r.cand_ms, r.hidden, strict=True))
    # Scheduling only ever adds time, so the least overhead over the rounds is the steady one:
    # escaped work adds to every call and shows in the candidate's least, noise does not.
    escape = Escape(
        clock_ms=clock_ms - least,
        reported_ms=statistics.median(r.cand_ms),  # by its own events; timing: attested
        escaped_ms=min(r.hidden) - least,
        paired_excess_ms=statistics.median(diffs),
        candidate_hidden_ms=min(r.hidden),
        reference_hidden_ms=least,
        hidden_medians_ms=(statistics.median(r.hidden), statistics.median(r.ref_hidden)),
        slack_ms=slack,
        resolution_ms=escape_charge.resolution_ms(r.ref_hidden, slack),
        busy_probes=sum(p > job.busy_probe_ms for p in r.probes),
        rounds=len(r.cand_ms),
        baselines_ms=plan.baselines_ms,
        copy_ms=plan.copy_ms,
    )
    return attested(r.cand_ms, r.hidden, True), attested(r.ref_ms, r.ref_hidden, False), escape


# ------------------------------------------------------------------ the judge's timed phase


def timed(plan: Plan, play: Play) -> Timed:
    """The timing, policed, of the rounds ``play`` runs. A first pass can stray: on a freshly
    started H200 an honest 0.06 ms kernel was once charged 0.33 ms of escaped work, and never
    again. So a charge stands only when a second pass, on inputs of its own (it cannot be
    answered from the first one's), bears it out: escaped work escapes again."""
    timing, paired, escape = _time(plan, play)
    first = charge(escape, plan.job)
    retimed = None
    if first:
        timing, paired, escape = _time(plan, play)
        escape = escape.model_copy(update={"first_pass": first.message})
        retimed = f"timed twice, the second pass counts; the first: {first.message}"
    verdict = charge(escape, plan.job)
    if verdict:
        raise verdict
    note = escape_charge.uncharged(escape, plan.job)
    if note:  # beyond the slack, within the resolution: flagged, timed by the clock
        escape = escape.model_copy(update={"uncharged": note})
    return Timed(timing, paired, escape, retimed)


def _time(plan: Plan, play: Play) -> tuple[TimingFigures, TimingFigures, Escape]:
    """Interleaved rounds, each on fresh inputs, every output compared: whole rounds until
    the budget, since on a large task the inputs and the comparison cost as much as the
    calls."""
    rounds, round_ms = Rounds(), []
    cfg = plan.job.timing

    def one_round(i: int, outliers: bool) -> None:
        t0 = _perf()
        rounds.add(play(i, outliers))
        round_ms.append((_perf() - t0) * 1e3)

    i, warm = 0, 0.0
    while warm < cfg.warmup_ms or i < 2:
        one_round(i, RNG.random() < 0.5)
        warm += round_ms[-1]
        i += 1
    n = int(cfg.timing_budget_ms / max(statistics.median(round_ms), 1e-3))
    n = max(cfg.min_timed, min(cfg.max_timed, n))
    if plan.planting:
        n = max(n, OUTLIER_MIN_TIMED)
    rounds.clear()
    planted = outlier_calls(n) if plan.planting else set()
    for k in range(n):
        one_round(i, k in planted)
        i += 1
    return figures(rounds, plan)


def outlier_calls(n: int) -> set[int]:
    """Which of ``n`` timed calls get outliers (needles.py): fewer than half, at places drawn in
    secret. Outliers in every call made them the workload timed, and they can make it a
    different problem: a logsumexp after a GEMM where one planted column dominates each row
    took the candidate 9x faster than the honest kernel with no flag, and the tolerance, set by
    the few outputs the outliers moved, let a fit stand in for the other rows. The
    median of the calls is now one without outliers, so no shortcut taken only on them pays. A
    sample of the inputs still has to pass the calls with outliers: to move the median a
    candidate must take it on half of the calls or more, and then meets one all but certainly
    (at ``OUTLIER_MIN_TIMED`` calls, 9 of the 12,870 choices of 8 calls miss all 7)."""
    return set(RNG.sample(range(n), (n - 1) // 2))


def copy_ms(cand_slots: list, ref_slots: list, sync: Callable[[], None]) -> float:
    """What copying the outputs into the lent slots costs (each runner does it in the
    hand-over the judge's clock measures); the slots are refilled by the next call."""
    best = float("inf")
    for _ in range(3):
        sync()
        t0 = _perf()
        for s, r in zip(cand_slots, ref_slots, strict=True):
            s.copy_(r)
        sync()
        best = min(best, (_perf() - t0) * 1e3)
    for s in cand_slots:  # the reference's outputs, readable there
        s.zero_()
    return best
