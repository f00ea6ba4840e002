"""The speedup distribution's log axis is labelled over the data's range: speedups of 0.85x to
1.3x showed two labels, 1x and 0.9x."""

import pytest

from htam.bench.metrics import UnitRow
from htam.bench.plots import ratio_ticks, speedup_distribution


def _row(i: int, speedup: float) -> UnitRow:
    return UnitRow(key=f"u{i}", method="htam", seed=i, task_id=f"t{i}", level=1,
                   steps_planned=3, state="complete", correct=True, speedup=speedup)  # fmt: skip


@pytest.mark.slow
def test_a_narrow_range_of_speedups_gets_labels_across_it():
    rows = [_row(i, s) for i, s in enumerate((0.85, 0.95, 1.02, 1.1, 1.3))]
    (ax,) = speedup_distribution(rows, ["htam"]).data["axes"]
    assert len(ax["yticklabels"]) >= 4, ax["yticklabels"]
    assert all(label.endswith("x") for label in ax["yticklabels"])


@pytest.mark.parametrize("lo, hi", [(0.85, 1.3), (0.5, 4.5), (0.05, 40), (0.98, 1.02), (1, 1e3)])
def test_ticks_are_round_ratios_inside_the_range(lo, hi):
    ticks = ratio_ticks(lo, hi)
    assert len(ticks) >= 4 and len(set(ticks)) == len(ticks)
    assert all(lo <= t <= hi for t in ticks)
    assert all(len(f"{t:g}") <= 5 for t in ticks)  # 0.3, not 0.30000000000000004
