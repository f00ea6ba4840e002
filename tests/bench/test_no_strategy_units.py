"""Units the proposer had no applicable strategy for are counted apart, per missing family."""

from htam.bench.metrics import UnitRow, summarize
from htam.bench.results import missing_family


def _row(key, correct=False, no_strategy=None):
    return UnitRow(key, "htam", 0, key, 1, 4, "complete", correct=correct, speedup=1.2 if correct
                   else None, curve=[1.2] if correct else [0.0], no_strategy=no_strategy)  # fmt: skip


def test_no_strategy_units_are_counted_apart_by_family():
    rows = [_row("a", True), _row("b"), _row("c", no_strategy="pooling"),
            _row("d", no_strategy="pooling"), _row("e", no_strategy="scan")]  # fmt: skip
    metrics = summarize(rows)
    assert metrics["no_strategy"] == 3
    assert metrics["no_strategy_families"] == {"pooling": 2, "scan": 1}
    assert metrics["correctness"] == 0.2 and metrics["correctness_applicable"] == 0.5


def test_the_missing_family_is_read_from_the_step():
    message = "no applicable strategy: unsupported module MaxPool2d (pool) (missing family: pooling (MaxPool2d))"
    step = {"feedback": {"status": "no_strategy", "messages": [message]}}
    assert missing_family([step]) == "pooling"
    assert missing_family([step, {"feedback": {"status": "ok"}}]) is None
