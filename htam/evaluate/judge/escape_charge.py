"""The charge of escaped work: a candidate whose calls show more time outside their events on
the judge's clock than the reference's runner does, by more than that clock tells apart here.

Two allowances stack. The *slack* (``judge_timing.figures``): the reference runner's hidden
times above their least, what an honest process's overhead varies by here. The *resolution*:
the escape compares two leasts, the candidate's and the reference's, and each is one draw from
its runner's spread; the candidate's may sit as high in that spread as the reference's upper
quartile while the reference's sits at its bottom. Only the reference's spread is taken (its
code is trusted; a candidate could widen its own at will). On a quiet H100 an honest 0.018 ms
Triton call was charged 0.189 ms against an allowance of 0.158 ms (slack 0.149 ms) while the
two runners' median hidden times were 0.123 ms apart; six evaluators sharing the card charged
honest 0.02-0.07 ms calls 0.2-0.3 ms on both passes, and the memory learned them as cheats.
An escape beyond the slack but within the resolution is not charged: the judge's clock cannot
tell it from an honest runner's overhead. It is flagged as within the clock's resolution
(the reward then takes the time as noise within 2x), and its time is bounded by the clock
as every candidate's is.

What an adversary gains by hiding work up to the charge: no more than below the slack. The
charge names a cheat; it is not what keeps a time honest. The attested time
(``judge_timing.figures``) is, charged or not, at least the judge's clock round by round
against the reference's runner (the candidate's own time plus the hidden time each call shows
beyond the reference's) less the doubt of that median (``paired_doubt``). Work hidden on every
call, of any size the charge lets pass, takes at most the doubt off each call: a call that
truly takes T ms is timed at no less than T - doubt, a speedup faked by T / (T - doubt) at
most, under 2x once T is twice the doubt; below that the call is within the clock's resolution
and flagged. Work hidden on fewer than half the calls moves neither the paired median nor the
candidate's median time. (tests/evaluate/test_escape_charge.py holds the numbers.)
"""

from __future__ import annotations

import statistics

from htam.evaluate.frames import Escape, Job
from htam.evaluate.judge.runner import Verdict
from htam.status import Status


def resolution_ms(ref_hidden: list[float], slack: float) -> float:
    """What the judge's clock tells apart here beyond the slack: the reference runner's hidden
    times from their least to their upper quartile, at least the slack."""
    if len(ref_hidden) < 2:
        return slack
    upper = statistics.quantiles(ref_hidden, n=4, method="inclusive")[2]
    return max(slack, upper - min(ref_hidden))


def paired_doubt(diffs: list[float], least_slack: float, method: str) -> float:
    """The doubt of the paired median (the candidate's hidden time beyond the reference's,
    round by round): two spreads over the root of their count and the least slack; an honest
    median is rarely raised, and then by little. On the CPU a call runs in the judge's sight,
    start to end, and the spread of a loaded machine is no doubt about it (a timer forged on
    every call got 16.3x against the honest 1x where two spreads over the root of 10 rounds
    were as large as the 3 ms call): the least slack alone."""
    if method == "perf_counter":
        return least_slack
    centre = statistics.median(diffs)
    spread = statistics.median(abs(d - centre) for d in diffs)
    return 2 * spread / len(diffs) ** 0.5 + least_slack


def allowance_ms(escape: Escape, job: Job) -> float:
    """Hidden time beyond the reference runner's that goes without a word: a share of the
    call's own time, and the slack."""
    return job.escape_ratio * escape.reported_ms + escape.slack_ms


def charged(escape: Escape, job: Job) -> bool:
    """The escape is beyond what the clock tells apart: the candidate's least hidden time
    exceeds the reference's by more than the allowance and the resolution, and its typical
    call (the paired median) by more than the allowance, so the work escaped on most calls,
    not only where the reference's runner had its luckiest call."""
    allowed = allowance_ms(escape, job)
    return escape.escaped_ms > allowed + escape.resolution_ms and escape.paired_excess_ms > allowed


def charge(escape: Escape, job: Job) -> Verdict | None:
    """Timing the judge's clock does not bear out, as a rejection with the figures; or None."""
    e, median = escape, escape.reported_ms
    if charged(e, job):
        return Verdict(
            Status.REJECTED,
            f"work escaped the timed stream: {e.escaped_ms:.3f} ms of each call ran "
            f"outside its events ({median:.3f} ms inside), by the judge's clock (beyond the "
            f"{e.reference_hidden_ms:.3f} ms the reference's runner shows; slack "
            f"{e.slack_ms:.3f} ms, resolution {e.resolution_ms:.3f} ms; median outside the "
            f"events: candidate {e.hidden_medians_ms[0]:.3f} ms, reference "
            f"{e.hidden_medians_ms[1]:.3f} ms, beyond it round by round "
            f"{e.paired_excess_ms:.3f} ms, over {e.rounds} calls)",
        )
    if e.busy_probes > max(1, e.rounds // 5):
        return Verdict(
            Status.REJECTED,
            f"the device was still busy after {e.busy_probes} of {e.rounds} "
            "of the candidate's calls had returned",
        )
    return None


def uncharged(escape: Escape, job: Job) -> str | None:
    """The flag of an escape beyond the allowance that is not charged (within the clock's
    resolution); None where there is none or it is charged."""
    e = escape
    if e.escaped_ms <= allowance_ms(e, job) or charged(e, job):
        return None
    return (
        f"{e.escaped_ms:.3f} ms of each call ran outside its events ({e.reported_ms:.3f} ms "
        f"inside), within the judge's clock resolution here (slack {e.slack_ms:.3f} ms, "
        f"resolution {e.resolution_ms:.3f} ms; beyond the reference's runner round by round "
        f"{e.paired_excess_ms:.3f} ms): not charged; its time is bounded by the judge's clock"
    )
