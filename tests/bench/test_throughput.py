"""The bench's throughput figures from the evaluator's events: the GPU's busy fraction is the
union of the stretches its queue was held (overlaps counted once), per GPU; build and timed
times per candidate."""

import json

import pytest

from htam.bench.throughput import load_events, throughput, throughput_table


def _gpu(start, end, gpu="0"):
    return {"event": "gpu", "kind": "judge", "start": start, "end": end, "waited": 0, "gpu": gpu}


def _cand(at, build, gpu_s, compile_s=0.0, gpu="0"):
    return {"event": "candidate", "at": at, "build_s": build, "gpu_s": gpu_s,
            "job_compile_s": compile_s, "prebuilt": compile_s == 0.0, "gpu": gpu}  # fmt: skip


def test_busy_fraction_counts_overlaps_once_and_build_is_apart():
    events = [_gpu(0, 4), _gpu(2, 6), _gpu(8, 10), _cand(6, 30, 4), _cand(10, 0, 5, compile_s=3)]
    figures = throughput(events)
    # wall: from the first candidate's start (6 - 30 - 4 = -28) to 10
    assert figures["wall_s"] == pytest.approx(38)
    assert figures["gpu_busy_fraction"] == pytest.approx(8 / 38)
    assert figures["candidates"] == 2
    assert figures["candidates_per_gpu_hour"] == pytest.approx(2 / (38 / 3600))
    assert figures["build_s"]["median"] == pytest.approx(16.5)  # 30, and 0 + 3 compiled in-job
    assert figures["timed_s"]["max"] == pytest.approx(4)  # 5 - 3 compiled, and 4
    assert figures["prebuilt_fraction"] == 0.5
    assert throughput_table(figures).rows[0][1] == "2"


def test_two_gpus_count_two_gpu_hours(tmp_path):
    events = [_gpu(0, 10, "0"), _gpu(0, 5, "1"), _cand(10, 0, 1, gpu="0"), _cand(10, 0, 1, gpu="1")]
    (tmp_path / "events").mkdir()
    with open(tmp_path / "events" / "events-1.jsonl", "w") as f:
        f.write("\n".join(json.dumps(e) for e in events) + "\n{cut")
    figures = throughput(load_events(tmp_path))
    assert figures["gpu_busy_fraction"] == pytest.approx(15 / 20)
    assert figures["wall_per_candidate_s"] == pytest.approx(10)
    assert throughput([]) is None
