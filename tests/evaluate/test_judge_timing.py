"""The judge's timing without runners: a charge of escaped work stands only when a second timed
pass, on inputs of its own, bears it out."""

import random
import statistics

import pytest
import torch

from htam.evaluate.frames import Job, TimingSettings
from htam.evaluate.judge import judge_timing
from htam.evaluate.judge.runner import Verdict

JOB = Job(kind="judge", device="cpu", call_timeout_s=1.0, compile_timeout_s=1.0,
          escape_ratio=0.5, escape_slack_ms=0.05, busy_probe_ms=2.0,
          timing=TimingSettings(warmup_ms=0.0, timing_budget_ms=10.0, min_timed=10,
                                max_timed=10, l2_flush_mb=0))  # fmt: skip
PLAN = judge_timing.Plan(JOB, "cuda_events")


def _rounds(hidden_by_pass: list[float]) -> tuple[judge_timing.Play, list[tuple]]:
    """Rounds that report a 0.06 ms call each, the reference's runner 0.01 ms hidden, and the
    candidate's hidden time of the pass the round belongs to; each on inputs of its own."""
    seeds: list[tuple] = []  # each call's input values

    def play(i: int, outliers: bool) -> judge_timing.Sample:
        seeds.append(tuple(torch.randn(4).tolist()))
        timing_pass = (len(seeds) - 1) // 12  # two warm-up rounds and ten timed a pass
        return judge_timing.Sample(0.06, hidden_by_pass[timing_pass], 0.06, 0.01)

    return play, seeds


def test_honest_figures_are_not_charged():
    play, seeds = _rounds([0.01])
    timed = judge_timing.timed(PLAN, play)
    assert judge_timing.charge(timed.escape, JOB) is None
    assert timed.escape.first_pass is None and timed.retimed is None
    assert timed.timing.median_ms == pytest.approx(0.06)
    assert len(seeds) == 12  # one pass: two warm-up rounds and ten timed


def test_a_stray_first_pass_is_timed_again_on_fresh_inputs():
    play, seeds = _rounds([0.33, 0.01])
    timed = judge_timing.timed(PLAN, play)
    assert timed.escape.first_pass.startswith("work escaped") and timed.escape.escaped_ms == 0.0
    assert timed.retimed.startswith("timed twice, the second pass counts")
    first, second = set(seeds[:12]), set(seeds[12:])
    assert len(first) == len(second) == 12 and not first & second  # a round per call


def test_work_that_escapes_both_passes_is_rejected():
    play, _ = _rounds([0.33, 0.33])
    with pytest.raises(Verdict) as got:
        judge_timing.timed(PLAN, play)
    assert got.value.status == "rejected"
    assert "work escaped the timed stream: 0.320 ms" in got.value.message
    assert "median outside the events: candidate 0.330 ms" in got.value.message


def test_a_busy_device_after_most_calls_is_rejected():
    play, _ = _rounds([0.01])
    escape = judge_timing.timed(PLAN, play).escape.model_copy(update={"busy_probes": 5})
    verdict = judge_timing.charge(escape, JOB)
    assert verdict.status == "rejected" and "still busy after 5 of 10" in verdict.message
    assert judge_timing.charge(escape.model_copy(update={"busy_probes": 2}), JOB) is None


def test_a_time_reported_short_on_every_call_is_bounded_by_the_paired_rounds():
    """Red team 10 on the H200: an 8 GiB ReLU reported each 3.6 ms call 1.6 ms short; the
    reference's hidden times spread over ~2 ms, so the floor of least times let 1.6 ms go."""
    noise = [0.3 * (i % 7) for i in range(21)]  # the reference runner's spread: 0 to 1.8 ms
    rounds = judge_timing.Rounds(
        cand_ms=[2.0] * 21,  # reported: 3.6 ms less 1.6
        hidden=[1.0 + 1.6 + n for n in noise],  # the 1.6 ms it left out shows as hidden time
        ref_ms=[3.6] * 21,
        ref_hidden=[1.0 + n for n in noise],
    )
    timing, paired, _ = judge_timing.figures(rounds, PLAN)
    assert timing.median_ms == pytest.approx(3.6, abs=0.1)
    assert paired.median_ms == pytest.approx(3.6)
    draw = random.Random(0)
    honest = judge_timing.Rounds(
        cand_ms=[3.6] * 21,
        hidden=[1.0 + draw.uniform(0, 1.8) for _ in range(21)],  # its own noise, as large
        ref_ms=[3.6] * 21,
        ref_hidden=[1.0 + draw.uniform(0, 1.8) for _ in range(21)],
    )
    timing, _, _ = judge_timing.figures(honest, PLAN)
    assert timing.median_ms == pytest.approx(3.6)


def test_on_the_cpu_a_call_takes_the_judges_clock_not_its_own_word():
    """Red team 12: a timer forged to 0.3 ms on every call of a 3 ms ReLU got 16.3x on a loaded
    CPU, where the paired rounds' doubt was as large as the call. On the CPU a call runs in the
    judge's sight: its time is at least what the judge's clock shows beyond the reference's
    runner's call in the same round, less the least slack (not the machine's spread)."""
    draw = random.Random(1)
    noise = [draw.uniform(0, 3.0) for _ in range(10)]  # a loaded machine: noise as large as a call
    rounds = judge_timing.Rounds(
        cand_ms=[0.3] * 10,  # reported
        hidden=[2.7 + n for n in noise],  # the rest of its 3 ms call, and the load
        ref_ms=[3.0] * 10,
        ref_hidden=[n for n in reversed(noise)],
    )
    timing, paired, _ = judge_timing.figures(rounds, judge_timing.Plan(JOB, "perf_counter"))
    beyond = [a - b for a, b in zip(noise, reversed(noise), strict=True)]  # 0 in the median
    slack = JOB.escape_slack_ms  # the least slack alone is taken off, not the spread
    assert timing.median_ms == pytest.approx(3.0 + statistics.median(beyond) - slack)
    assert paired.median_ms == pytest.approx(3.0)
