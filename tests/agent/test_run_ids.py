"""Every run learns into the bank under an id of its own; a resumed run keeps its id, so that
the bank, which records each (run id, task, step) once, does not count a replayed step twice.

Newcomer: the id was always ``htam:<task>:s<seed>``, so a second run of the same command
(another run directory, another path) recorded ``memory_updated: false`` on every step."""

from __future__ import annotations

import json

import pytest

from htam.memory import MemoryBank
from tests.agent.test_exhaustion import (
    OneCodePerStrategy,
    favour_d0,
    first_best,
    optimize,
    step_files,
)
from tests.agent.test_exhaustion import three_directions as seed


class NewCodeEveryStep(OneCodePerStrategy):
    """New code at every step (no repeats: what is checked here is the id alone)."""

    def propose(self, request):
        proposal = super().propose(request)
        proposal.code += f"    STEP = {request.step}\n"
        return proposal


def run_id(out) -> str:
    return json.loads((out / "run.json").read_text())["run_id"]


def test_a_second_run_of_the_same_command_learns_what_is_new_to_it(tmp_path):
    for name in ("first", "second"):  # the same command twice, as README says to
        with MemoryBank.open(tmp_path / "m.db", create=True) as bank:
            optimize(bank, tmp_path / name, steps=3, proposer=NewCodeEveryStep())
    first_codes = {p.read_text() for p in (tmp_path / "first" / "steps").glob("*.py")}
    second = step_files(tmp_path / "second")
    codes = [(tmp_path / "second/steps" / f"step_{s['step']:02d}.py").read_text() for s in second]
    # a candidate the bank learned from in the first run is not learned again (a rerun served
    # from the cache is no news); the others are, under the second run's own id
    assert [s["memory_updated"] for s in second] == [c not in first_codes for c in codes]
    with MemoryBank.open(tmp_path / "m.db") as bank:
        assert bank.step_count() == 3 + sum(c not in first_codes for c in codes)
    first_id, second_id = run_id(tmp_path / "first"), run_id(tmp_path / "second")
    assert first_id != second_id
    assert first_id.startswith("htam:builtin/level1/1_ReLU:s0:")
    assert second_id.startswith("htam:builtin/level1/1_ReLU:s0:")
    assert {s["memory_record"]["run_id"] for s in second} == {second_id}


def test_a_resumed_run_keeps_its_id_and_counts_no_step_twice(tmp_path):
    with MemoryBank.in_memory(seed()) as bank:
        favour_d0(bank)

        def stop_after_step_1(step):
            if step.step == 1:
                raise KeyboardInterrupt

        evaluator = first_best()
        with pytest.raises(KeyboardInterrupt):
            optimize(
                bank,
                tmp_path / "run",
                on_step=stop_after_step_1,
                evaluator=evaluator,
                proposer=NewCodeEveryStep(),
            )
        started = run_id(tmp_path / "run")
        assert bank.step_count() == 12 + 2
        optimize(
            bank, tmp_path / "run", resume=True, evaluator=evaluator, proposer=NewCodeEveryStep()
        )
        assert run_id(tmp_path / "run") == started
        steps = step_files(tmp_path / "run")
        assert {s["memory_record"]["run_id"] for s in steps} == {started}
        assert bank.step_count() == 12 + 5  # the two replayed steps not recorded again
        assert sum(d.stats.tries for d in bank.directions()) == 12 + 5
        # resuming a finished run replays every step and learns nothing new
        optimize(
            bank, tmp_path / "run", resume=True, evaluator=evaluator, proposer=NewCodeEveryStep()
        )
        assert bank.step_count() == 12 + 5


def test_a_run_started_before_ids_were_unique_resumes_under_its_old_id(tmp_path):
    """run.json of an older run holds no id: its steps went to the bank under the old one."""
    with MemoryBank.in_memory(seed()) as bank:

        def stop_after_step_0(step):
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            optimize(bank, tmp_path / "run", on_step=stop_after_step_0)
        spec = json.loads((tmp_path / "run" / "run.json").read_text())
        del spec["run_id"]
        (tmp_path / "run" / "run.json").write_text(json.dumps(spec))
        optimize(bank, tmp_path / "run", steps=5, resume=True)
        steps = step_files(tmp_path / "run")
        assert steps[1]["memory_record"]["run_id"] == "htam:builtin/level1/1_ReLU:s0"
