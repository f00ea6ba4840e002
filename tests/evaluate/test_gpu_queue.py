"""The device's queue: GPU jobs of threads and of processes sharing a GPU (a bench's lanes)
never overlap, and every stretch it was held is an event, in memory and in the events folder."""

import json
import subprocess
import sys
import threading
import time

from htam.evaluate.host.gpu_queue import EVENTS_ENV, GpuQueue

HOLD = """
import sys, time
from htam.evaluate.host.gpu_queue import GpuQueue
q = GpuQueue(sys.argv[1], "cuda")
with q.held("judge"):
    print("held", flush=True)
    time.sleep(1.0)
"""


def _disjoint(events):
    spans = sorted((e["start"], e["end"]) for e in events if e["event"] == "gpu")
    return all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))


def test_threads_take_turns_and_every_stretch_is_an_event(tmp_path, monkeypatch):
    monkeypatch.setenv(EVENTS_ENV, str(tmp_path / "events"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "7")
    queue = GpuQueue(tmp_path / "cache", "cuda")

    def job():
        with queue.held("judge"):
            time.sleep(0.05)

    threads = [threading.Thread(target=job) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(queue.events) == 4 and _disjoint(queue.events)
    (sink,) = (tmp_path / "events").glob("*.jsonl")
    written = [json.loads(line) for line in sink.read_text().splitlines()]
    assert written == queue.events and {e["gpu"] for e in written} == {"7"}


def test_another_process_on_the_same_gpu_waits_for_the_queue(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    queue = GpuQueue(tmp_path, "cuda")
    with queue.held("reference"):
        pass
    holder.wait()
    # it waited for the other process's job (a second on the GPU) to end
    assert queue.events[0]["waited"] > 0.3
