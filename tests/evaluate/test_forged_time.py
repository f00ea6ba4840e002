"""A candidate that under-reports some of its calls' times (red team): the judge's clock bears
out every call's time, so the speedup stays what the kernel earns."""

import pytest

from htam.evaluate import Evaluator
from tests.evaluate.cases import FIXTURES
from tests.evaluate.conftest import fast_config, task_for

TASK = FIXTURES / "relu_16mb_task.py"  # calls of milliseconds at the large size


@pytest.mark.slow
def test_forging_two_calls_in_three_buys_nothing():
    with Evaluator("cpu", fast_config(size="large", min_timed=9)) as evaluator:
        results = [
            evaluator.evaluate(task_for(TASK), (FIXTURES / name).read_text(), "cpp")
            for name in (
                "honest_relu_pyh.py",
                "attack_cpp_forge_some_calls.py",
                "honest_relu_pyh.py",
            )
        ]
    # the honest kernel timed before and after, its better time kept: one load spike on a shared
    # 2-core machine once made it 19x slower than the reference (CI, 2026-12-03)
    honest = max(results[0], results[2], key=lambda r: r.speedup or 0.0)
    forged = results[1]
    assert honest.status == "ok", honest.messages
    assert forged.status in ("ok", "rejected"), forged.messages
    if forged.status == "ok":
        # The same kernel: before, it reported 100x its honest speedup (a hundredth of the time
        # on the median call). Now it gets at most its least true time instead of its median:
        # on a loaded 2-core machine up to ~2.5x apart, so the bound is 4x.
        assert forged.speedup < 4 * honest.speedup, (forged.speedup, honest.speedup)
