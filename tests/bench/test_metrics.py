"""Bench metrics on hand-made rows, every expected number computed by hand."""

import math

import pytest

from htam.bench.metrics import (
    UnitRow,
    compute_metrics,
    correctness,
    discovery_curve,
    fast_p,
    geomean,
    geomean_speedup,
    kept_geomean,
    summarize,
)


def row(
    method="htam",
    correct=True,
    speedup=None,
    vs_compile=None,
    curve=(),
    level=1,
    state="complete",
    steps=3,
    **kw,
):
    return UnitRow(
        key=f"{method}/x",
        method=method,
        seed=0,
        task_id="t",
        level=level,
        steps_planned=steps,
        state=state,
        correct=correct,
        speedup=speedup,
        speedup_vs_compile=vs_compile,
        curve=list(curve),
        **kw,
    )


# Four units: 2.0x, 0.5x, 1.2x correct, one incorrect.
ROWS = [
    row(speedup=2.0, vs_compile=1.0, curve=[0.0, 1.5, 2.0]),
    row(speedup=0.5, vs_compile=0.25, curve=[0.5, 0.5, 0.5]),
    row(speedup=1.2, curve=[1.2]),  # a shorter run (e.g. oneshot) keeps its last value
    row(correct=False, curve=[0.0, 0.0, 0.0]),
]


def test_correctness_and_fast_p():
    assert correctness(ROWS) == 0.75
    assert fast_p(ROWS, 0.0) == 0.75
    assert fast_p(ROWS, 0.8) == 0.5  # 2.0 and 1.2
    assert fast_p(ROWS, 1.0) == 0.5
    assert fast_p(ROWS, 1.5) == 0.25  # 2.0 only
    assert fast_p(ROWS, 2.0) == 0.0  # strictly greater
    assert correctness([]) is None


def test_geomeans_both_variants():
    # fail1: (2.0 * 0.5 * 1.2 * 1.0) ** (1/4) = 1.2 ** 0.25
    assert geomean_speedup(ROWS, "eager", "fail1") == pytest.approx(1.2**0.25)
    # excl: (2.0 * 0.5 * 1.2) ** (1/3)
    assert geomean_speedup(ROWS, "eager", "excl") == pytest.approx(1.2 ** (1 / 3))
    # vs compile: only two units were timed against torch.compile
    assert geomean_speedup(ROWS, "compile", "excl") == pytest.approx(0.5)
    assert geomean_speedup(ROWS, "compile", "fail1") == pytest.approx(0.25**0.25)
    assert geomean_speedup([row(correct=False)], "eager", "fail1") is None
    assert geomean([4.0, 1.0]) == pytest.approx(2.0)
    with pytest.raises(ValueError):
        geomean([0.0])


def test_discovery_curve_counts_no_correct_yet_as_one():
    # step 0: (1.0 + 0.5 + 1.2 + 1.0) / 4; step 1: (1.5 + 0.5 + 1.2 + 1.0) / 4;
    # step 2: (2.0 + 0.5 + 1.2 + 1.0) / 4
    assert discovery_curve(ROWS) == pytest.approx([0.925, 1.05, 1.175])


def test_failed_units_count_in_every_denominator():
    rows = ROWS + [row(correct=False, state="failed", curve=[])]
    assert correctness(rows) == 0.6
    assert fast_p(rows, 1.0) == 0.4
    assert geomean_speedup(rows, "eager", "fail1") == pytest.approx(1.2**0.2)
    assert discovery_curve(rows)[0] == pytest.approx((0.925 * 4 + 1.0) / 5)


def test_summary_sums_cost_tokens_and_times():
    rows = [
        row(
            speedup=2.0,
            curve=[2.0],
            cost_usd=0.5,
            tokens=100,
            wall_s=10.0,
            eval_s=4.0,
            timing_meaningful=True,
        ),
        row(
            correct=False,
            state="partial",
            cost_usd=0.25,
            tokens=50,
            wall_s=5.0,
            eval_s=1.0,
            timing_meaningful=False,
        ),
    ]
    s = summarize(rows)
    assert (s["units"], s["complete"], s["partial"], s["failed"]) == (2, 1, 1, 0)
    assert s["cost_usd"] == 0.75 and s["tokens"] == 150
    assert s["wall_s"] == 15.0 and s["eval_s"] == 5.0
    assert s["timing_meaningful"] is False
    assert s["fast_1"] == 0.5 and s["fast_p"]["2.0"] == 0.0
    assert s["candidate_geomean_eager_fail1"] == pytest.approx(math.sqrt(2.0))
    assert s["kept_geomean_eager"] == pytest.approx(math.sqrt(2.0))


def test_per_method_and_level_split_and_note():
    rows = [
        row("htam", speedup=4.0, curve=[4.0], level=1, timing_meaningful=False),
        row("htam", correct=False, level=2),
        row("random", speedup=1.0, curve=[1.0], level=1),
    ]
    m = compute_metrics(rows)
    assert set(m["methods"]) == {"htam", "random"}
    assert m["methods"]["htam"]["correctness"] == 0.5
    assert m["methods"]["htam"]["candidate_geomean_eager_fail1"] == pytest.approx(2.0)
    assert m["by_level"]["htam"]["1"]["fast_1"] == 1.0
    assert m["by_level"]["htam"]["2"]["fast_1"] == 0.0
    assert m["methods"]["random"]["fast_1"] == 0.0  # 1.0x is not faster than eager
    assert any("not meaningful" in n for n in m["notes"])
    assert "fast_p" in m["definitions"]


def test_kept_speedup_never_below_one_and_named_apart_from_the_candidate():
    # Units: 2.0x and 0.5x correct (the user keeps the reference over 0.5x: 1.0), 1.2x correct,
    # one incorrect (1.0).
    assert [r.kept_speedup for r in ROWS] == [2.0, 1.0, 1.2, 1.0]
    assert kept_geomean(ROWS) == pytest.approx((2.0 * 1.2) ** 0.25)
    s = summarize(ROWS)
    assert s["kept_geomean_eager"] == pytest.approx((2.0 * 1.2) ** 0.25)
    # the raw best-candidate geomean still counts the 0.5x candidate, as KernelBench does
    assert s["candidate_geomean_eager_fail1"] == pytest.approx(1.2**0.25)
    assert s["candidate_geomean_eager_excl"] == pytest.approx(1.2 ** (1 / 3))
    assert s["kept_geomean_eager"] > s["candidate_geomean_eager_fail1"]
    assert kept_geomean([row(correct=False), row(speedup=0.1)]) == 1.0
    assert "geomean_eager_fail1" not in s  # only the two distinct names
