"""A bench directory read back: the note on the size it was timed at says what is true of it."""

from __future__ import annotations

import json

from htam.bench.results import bench_metrics


def _bench(tmp_path, size: str):
    (tmp_path / "plan.json").write_text("[]")
    (tmp_path / "bench.json").write_text(json.dumps({"identity": {"size": size}}))
    return bench_metrics(tmp_path)


def test_the_small_size_note_tells_reduced_sizes_from_a_kernelbench_files_own_shapes(tmp_path):
    (note,) = [n for n in _bench(tmp_path, "small")["notes"] if "small size" in n]
    # not "the CPU's default" (optimize times C++ at large there when it fits)
    assert note.startswith("Timed at the small size (a bench's default on the CPU)")
    assert "HTAM_SMALL" in note and "need not hold at its full size" in note
    # a KernelBench file without HTAM_SMALL is as large at small as at large
    assert "without HTAM_SMALL (an unmodified KernelBench file) ran at its own shapes" in note
    assert "RUN_DIR/best.py --size large" in note  # where a unit's best.py is


def test_no_size_note_at_the_large_size(tmp_path):
    assert not [n for n in _bench(tmp_path, "large")["notes"] if "small size" in n]
