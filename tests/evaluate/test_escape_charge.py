"""The charge of escaped work near the judge's clock resolution (escape_charge.py), from samples
built by hand: an honest tiny call whose hidden time the clock cannot tell from the reference's
is flagged, not charged; work well above the resolution is charged; an adversary hiding the
most work the charge lets pass gains no more than the doubt of the paired time."""

from types import SimpleNamespace

import pytest

from htam.agent.outcomes import CLOCK_FLAG
from htam.evaluate import frames
from htam.evaluate.eval_config import EvalConfig
from htam.evaluate.frames import Job, TimingSettings
from htam.evaluate.host.verdict import add_timing
from htam.evaluate.host.watchdog import JobOutcome
from htam.evaluate.judge import escape_charge, judge_timing
from htam.evaluate.result import EvalResult
from htam.status import Status

JOB = Job(kind="judge", device="cuda", call_timeout_s=1.0, compile_timeout_s=1.0,
          escape_ratio=0.5, escape_slack_ms=0.05, busy_probe_ms=2.0,
          timing=TimingSettings(warmup_ms=0.0, timing_budget_ms=10.0, min_timed=33,
                                max_timed=33, l2_flush_mb=0))  # fmt: skip
PLAN = judge_timing.Plan(JOB, "cuda_events")
N = 33


def spread(least: float, median: float) -> list[float]:
    """33 hidden times, ascending: ``least``, evenly up to ``median`` (the 17th), then 0.02 ms
    apart above it (the upper quartile, the 25th, 0.16 ms above the median)."""
    low = [least + (median - least) * k / 16 for k in range(17)]
    return low + [median + 0.02 * k for k in range(1, 17)]


# The reference runner's hidden times of the H100 first pass that charged an honest
# mnist_linear_relu (least 0.434 ms, median 0.583 ms, 33 calls).
REF_HIDDEN = spread(0.434, 0.583)


def rounds(reported: float, hidden: list[float]) -> judge_timing.Rounds:
    return judge_timing.Rounds(
        cand_ms=[reported] * N,
        hidden=hidden,
        ref_ms=[0.027] * N,
        ref_hidden=list(REF_HIDDEN),
        probes=[0.0] * N,
    )


def test_the_honest_tiny_call_the_h100_charged_is_flagged_not_charged():
    """Its least hidden time 0.189 ms above the reference's against an allowance of 0.158 ms
    (a share of 0.018 ms and the 0.149 ms slack): charged before. The reference's own upper
    quartile sits 0.309 ms above its least, and the two medians are 0.123 ms apart: within what
    the clock tells apart."""
    timing, _, escape = judge_timing.figures(rounds(0.018, spread(0.623, 0.706)), PLAN)
    assert escape.escaped_ms == pytest.approx(0.189)
    assert escape.slack_ms == pytest.approx(0.149)
    assert escape_charge.allowance_ms(escape, JOB) == pytest.approx(0.158)
    assert escape.resolution_ms == pytest.approx(0.309)
    assert escape.paired_excess_ms == pytest.approx(0.123)
    assert escape.escaped_ms > escape_charge.allowance_ms(escape, JOB)  # the old charge
    assert escape_charge.charge(escape, JOB) is None
    note = escape_charge.uncharged(escape, JOB)
    assert note is not None and CLOCK_FLAG in note and "not charged" in note
    # Its time is the judge's clock's, round by round: 0.018 + 0.123 less the 0.05 ms doubt.
    assert timing.median_ms == pytest.approx(0.091)


def test_the_flag_reaches_the_result_and_a_timed_pass_carries_it():
    sample = iter(zip(spread(0.623, 0.706) * 3, REF_HIDDEN * 3, strict=True))

    def play(i: int, outliers: bool) -> judge_timing.Sample:
        hidden, ref_hidden = next(sample)
        return judge_timing.Sample(0.018, hidden, 0.027, ref_hidden)

    timed = judge_timing.timed(PLAN, play)
    assert timed.retimed is None and timed.escape.uncharged
    verdict = frames.Verdict(status=Status.OK, timing=timed.timing,
                             paired_reference=timed.paired, escape=timed.escape)  # fmt: skip
    result = EvalResult(Status.OK)
    ref = SimpleNamespace(flops=1000, nbytes=4000, dtypes=["float32"], timing=None,
                          compile_timing=None)  # fmt: skip
    peaks = {"bandwidth_gbs": 3000.0, "tf32_tflops": 400.0}
    add_timing(result, JobOutcome(frames=[verdict]), ref, EvalConfig(), peaks, "cuda")
    assert timed.escape.uncharged in result.flags
    assert any(CLOCK_FLAG in flag for flag in result.flags)


def test_work_well_above_the_resolution_is_still_charged():
    """A side stream's millisecond on every call of a 0.005 ms reported kernel, under the same
    noise: 1 ms beyond the reference's least, against 0.0525 + 0.149 + 0.309 ms."""
    hidden = [h + 1.0 for h in REF_HIDDEN]
    _, _, escape = judge_timing.figures(rounds(0.005, hidden), PLAN)
    verdict = escape_charge.charge(escape, JOB)
    assert verdict is not None and verdict.status is Status.REJECTED
    assert "work escaped the timed stream: 1.000 ms" in verdict.message
    assert "resolution 0.309 ms" in verdict.message
    assert escape_charge.uncharged(escape, JOB) is None


def test_hiding_the_most_the_charge_lets_pass_fakes_little():
    """An adversary that reports 0.02 ms and hides w ms of its work outside its events on
    every call, w = the allowance (0.159) + the resolution (0.309) = 0.468 ms: not charged, a
    hair more is. Its true call takes 0.488 ms; the judge times it at no less than that less the
    paired doubt (0.05 ms here, honest noise paired with the reference's): 1.11x faked at
    most, against an honest twin that reports all 0.488 ms inside its events."""
    w = 0.159 + 0.309
    _, _, honest_escape = judge_timing.figures(rounds(0.488, list(REF_HIDDEN)), PLAN)
    honest, _, _ = judge_timing.figures(rounds(0.488, list(REF_HIDDEN)), PLAN)
    timing, _, escape = judge_timing.figures(rounds(0.02, [h + w for h in REF_HIDDEN]), PLAN)
    assert escape.escaped_ms == pytest.approx(w)
    assert escape_charge.charge(escape, JOB) is None and escape_charge.uncharged(escape, JOB)
    more = [h + w + 0.002 for h in REF_HIDDEN]
    assert escape_charge.charge(judge_timing.figures(rounds(0.02, more), PLAN)[2], JOB)
    doubt = escape_charge.paired_doubt([w] * N, JOB.escape_slack_ms, "cuda_events")
    assert doubt == pytest.approx(0.05)
    assert timing.median_ms == pytest.approx(0.488 - doubt)
    assert honest.median_ms == pytest.approx(0.488) and honest_escape.uncharged is None
    assert honest.median_ms / timing.median_ms == pytest.approx(1.114, abs=1e-3)


def test_hidden_noise_of_its_own_widens_no_allowance():
    """The resolution is the reference runner's spread, never the candidate's: a candidate
    whose hidden times spread over 2 ms more (jitter it adds at will) leaves the resolution where
    the reference put it, and its paired time rises with the jitter's median."""
    jitter = [2.0 * k / (N - 1) for k in range(N)]  # 0 to 2 ms, median 1 ms
    hidden = [h + 0.3 + j for h, j in zip(REF_HIDDEN, reversed(jitter), strict=True)]
    timing, _, escape = judge_timing.figures(rounds(0.02, hidden), PLAN)
    assert escape.resolution_ms == pytest.approx(0.309)
    diffs = [h - r for h, r in zip(hidden, REF_HIDDEN, strict=True)]
    doubt = escape_charge.paired_doubt(diffs, JOB.escape_slack_ms, "cuda_events")
    assert timing.median_ms == pytest.approx(0.02 + escape.paired_excess_ms - doubt)
    assert timing.median_ms > 0.02 + 0.3 + 0.5  # its 0.3 ms and most of the jitter's 1 ms


def test_a_resolution_never_below_the_slack():
    assert escape_charge.resolution_ms([0.4] * 10, 0.05) == pytest.approx(0.05)
    assert escape_charge.resolution_ms([0.4], 0.05) == pytest.approx(0.05)
    assert escape_charge.resolution_ms(REF_HIDDEN, 0.149) == pytest.approx(0.309)
