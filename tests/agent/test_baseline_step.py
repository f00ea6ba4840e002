"""The offline proposer's first code, when the chosen direction has no template for the task,
is the task translated with no strategy applied: the step follows no direction, so the memory
credits none with it (a helper saw a newcomer's step 0 recorded under a direction with no
template for the task, the baseline's speedup learned as that direction's)."""

from __future__ import annotations

from htam.memory import MemoryBank
from htam.offline import OfflineProposer
from tests.agent.test_exhaustion import CHAIN, first_best, optimize, step_files


def test_the_unmodified_baseline_is_recorded_under_no_direction_and_teaches_nothing(tmp_path):
    # seed 0 picks fusion first, and a lone ReLU has no fusion template: step 0 writes the
    # baseline (it was learned as fusion's 2x)
    with MemoryBank.in_memory() as bank:
        summary = optimize(bank, tmp_path / "run", steps=3, proposer=OfflineProposer("cpu"),
                           evaluator=first_best())  # fmt: skip
        learned = bank.step_count()
    first, *rest = step_files(tmp_path / "run")
    assert first["proposal"]["baseline"] is True and first["strategy"] is None
    assert first["direction"] == "none" and first["memory_updated"] is False
    # later steps: the proposer's own choice, recorded under the direction it belongs to
    assert all(not s["proposal"]["baseline"] and s["strategy"] for s in rest)
    assert all(s["direction"] == s["strategy"].split(".")[0] for s in rest)
    assert learned == sum(s["memory_updated"] for s in rest) and summary.statuses == ["ok"] * 3


def test_a_strategy_on_the_first_code_is_not_the_baseline(tmp_path):
    with MemoryBank.in_memory() as bank:
        optimize(bank, tmp_path / "run", steps=1, proposer=OfflineProposer("cpu"), task=CHAIN,
                 evaluator=first_best())  # fmt: skip
    (first,) = step_files(tmp_path / "run")
    assert first["proposal"]["baseline"] is False and first["strategy"]
    assert first["direction"] == first["strategy"].split(".")[0] and first["memory_updated"]
