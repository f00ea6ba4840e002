"""A candidate that under-reports some of its calls' times (red team): the judge's clock bears
out every call's time, so the speedup stays what the kernel earns."""

import dataclasses

import pytest
import torch

from htam.evaluate import Evaluator
from htam.evaluate.judge import judge_timing
from tests.evaluate.cases import FIXTURES
from tests.evaluate.conftest import fast_config, task_for

TASK = FIXTURES / "relu_16mb_task.py"  # calls of milliseconds at the large size


@pytest.mark.slow
@pytest.mark.parametrize(
    ("attack", "honest_twin"),
    [
        ("attack_cpp_forge_some_calls.py", "honest_relu_pyh.py"),  # two calls in three
        ("attack_plain_forge.py", "honest_relu_cpp.py"),  # every call (red team 12: 16.3x)
    ],
)
def test_a_forged_timer_buys_nothing(attack, honest_twin):
    with Evaluator("cpu", fast_config(size="large", min_timed=9)) as evaluator:
        results = [
            evaluator.evaluate(task_for(TASK), (FIXTURES / name).read_text(), "cpp")
            for name in (honest_twin, attack, honest_twin)
        ]
    # the honest kernel timed before and after, its better time kept: one load spike on a shared
    # 2-core machine once made it 19x slower than the reference (CI, 2026-12-03)
    honest = max(results[0], results[2], key=lambda r: r.speedup or 0.0)
    forged = results[1]
    assert honest.status == "ok", honest.messages
    assert forged.status in ("ok", "rejected"), forged.messages
    if forged.status == "ok":
        # The same kernel: before, it reported up to 100x its honest speedup. On the CPU its
        # time is now the judge's clock, as the honest kernel's is: what is left is the load of
        # a shared 2-core machine between the runs (up to ~2.5x), so the bound is 4x.
        assert forged.speedup < 4 * honest.speedup, (forged.speedup, honest.speedup)


def test_a_hand_over_with_no_copy_offsets_nothing_of_the_call():
    """Red team 10 (attack_slot_handover.py): a solution that returns the lent slot skips the
    hand-over's 4 ms copy and reports its 10 ms call as 6 ms. The 4 ms it left out of its
    events show as hidden time; before, the copy it skipped cancelled them."""
    forged = judge_timing.hidden_ms(call=10.1, handover=0.1, reported=6.0, baseline=0.1, copy=4.0)
    assert forged == pytest.approx(4.0)
    honest = judge_timing.hidden_ms(call=10.1, handover=4.1, reported=10.0, baseline=0.1, copy=4.0)
    assert honest == pytest.approx(0.0)
    slow = judge_timing.hidden_ms(call=10.1, handover=6.1, reported=10.0, baseline=0.1, copy=4.0)
    assert slow == pytest.approx(2.0)  # a hand-over that does work still shows it


@pytest.mark.gpu
def test_returning_the_lent_slot_buys_nothing_on_the_gpu():
    """attack_slot_handover.py, forged and with its time left honest, on 8 GiB (4 on an 80 GB
    card): before, the forged one got 1.68x where the honest one got 0.96x. Returning the same
    lent slot at every call is an output kept across calls: both are refused for it (H100,
    2026-12-06), whatever their clocks say."""
    source = (FIXTURES / "attack_slot_handover.py").read_text()
    config = fast_config(size="large", memory_limit_mb=16384, min_timed=20)
    with Evaluator("cuda", config) as evaluator:
        task = task_for(FIXTURES / "relu_8gb_task.py")
        if torch.cuda.get_device_properties(0).total_memory < (100 << 30):
            # an 80 GB card holds the evaluation of 4 GiB (5x its tensors), not of 8
            task = dataclasses.replace(task, source=task.source.replace("32768", "16384"))
        honest = evaluator.evaluate(task, source.replace("FORGE = True", "FORGE = False"), "triton")
        forged = evaluator.evaluate(task, source, "triton")
    for result in (honest, forged):
        assert result.status == "rejected", result.messages
        assert "shares storage with an output of the call before" in " ".join(result.messages)


@pytest.mark.parametrize(
    ("median_ms", "status"), [(0.0, "rejected"), (5e-324, "rejected"), (0.004, "ok")]
)
def test_a_median_time_of_zero_is_rejected_not_divided_by(median_ms, status):
    # every call reported as 0 ms, below what the judge's clock can bound on a short call: the
    # host divided by it after the verdict, and the ZeroDivisionError ended the run (a denormal
    # made the speedup infinite)
    from htam.evaluate import EvalConfig
    from htam.evaluate.frames import TimingFigures, Verdict
    from htam.evaluate.host.verdict import judge_outcome
    from htam.evaluate.host.watchdog import JobOutcome
    from htam.evaluate.result import EvalResult
    from htam.status import Status

    timing = TimingFigures(
        median_ms=median_ms, min_ms=0.0, max_ms=median_ms, iqr_ms=0.0, trials=10, method="x"
    )
    result = EvalResult(Status.OK)
    outcome = JobOutcome(frames=[Verdict(status=Status.OK, timing=timing)])
    judge_outcome(result, outcome, EvalConfig())
    assert result.status == status
    assert status == "ok" or "median time is" in result.messages[0]
