"""A bench directory read back: the note on the size it was timed at says what is true of it."""

from __future__ import annotations

import json

from htam.bench.results import bench_metrics


def _note(tmp_path, size: str, **recorded) -> str | None:
    (tmp_path / "plan.json").write_text("[]")
    bench = {"identity": {"size": size}} | recorded
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    notes = [n for n in bench_metrics(tmp_path)["notes"] if "small size" in n]
    return notes[0] if notes else None


def test_the_small_size_note_names_the_tasks_that_ran_at_a_reduced_size(tmp_path):
    note = _note(tmp_path, "small", reduced_size_tasks=["builtin/level1/1_ReLU"])
    # not "the CPU's default" (optimize times C++ at large there when it fits)
    assert note.startswith("Timed at the small size (a bench's default on the CPU): 1 task(s)")
    assert "reduced size (HTAM_SMALL: builtin/level1/1_ReLU), where a speedup need not" in note
    assert "RUN_DIR/best.py --size large" in note  # where a unit's best.py is
    many = _note(tmp_path, "small", reduced_size_tasks=[f"s/t{k}" for k in range(5)])
    assert "(HTAM_SMALL: s/t0, s/t1, s/t2 and 2 more)" in many


def test_a_bench_of_kernelbench_files_alone_ran_at_their_own_shapes(tmp_path):
    # a KernelBench file without HTAM_SMALL is as large at small as at large: no caveat
    note = _note(tmp_path, "small", reduced_size_tasks=[])
    assert "no task here has a reduced size (HTAM_SMALL)" in note and "need not" not in note


def test_a_bench_written_before_the_record_gets_the_general_note(tmp_path):
    note = _note(tmp_path, "small")
    assert "without HTAM_SMALL (an unmodified KernelBench file) ran at its own shapes" in note


def test_no_size_note_at_the_large_size(tmp_path):
    assert _note(tmp_path, "large") is None
