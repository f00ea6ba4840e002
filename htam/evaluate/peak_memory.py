"""The peak memory of a process tree on the CPU, sampled: the sum of every descendant's
proportional set size of anonymous and shared memory (PSS: a page that several processes map
counts once in all, as the judge's lent buffers are) and of what ``/dev/shm`` holds beyond what
it held at the start.

The CPU evaluator holds the same copies of a task's tensors as the GPU one (the same judge,
runners and harness, with host memory for device memory), and glibc hands large blocks back
at once, so the peak of a CPU evaluation counts the live copies: the measure behind
footprint.py's multiples (tests/evaluate/test_footprint.py, scripts/device/gpu_memory.py on
the card).
"""

from __future__ import annotations

import os
import re
import threading
import time
from pathlib import Path

_PROC = Path("/proc")


def descendants(root: int) -> list[int]:
    """``root`` and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += children.get(pid, [])
    return found


_COUNTED = ("Pss_Anon:", "Pss_Shmem:")


def pss_bytes(pid: int) -> int:
    """A process's proportional set size of anonymous and shared memory (where tensors live:
    the heap, large mappings, memfd buffers), 0 when it is gone or cannot be read. Pages of
    files (the libraries every process maps) are left out: their share moves with which
    processes happen to run, not with the task's tensors."""
    total = 0
    try:
        with open(_PROC / str(pid) / "smaps_rollup") as f:
            for line in f:
                if line.startswith(_COUNTED):
                    total += int(line.split()[1]) << 10
    except OSError:
        return 0
    return total


def shm_bytes() -> int:
    st = os.statvfs("/dev/shm")
    return (st.f_blocks - st.f_bfree) * st.f_frsize


def tree_bytes(root: int) -> int:
    return sum(pss_bytes(pid) for pid in descendants(root))


class PeakSampler:
    """The largest ``tree_bytes(root) + /dev/shm growth`` seen every ``every_s`` while the
    ``with`` block runs (``peak``), and the value when it started (``start``)."""

    def __init__(self, root: int | None = None, every_s: float = 0.02):
        self.root = os.getpid() if root is None else root
        self.every_s = every_s
        self.start = self.peak = 0
        self._shm0 = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> int:
        return tree_bytes(self.root) + max(0, shm_bytes() - self._shm0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.sample())
            time.sleep(self.every_s)

    def __enter__(self) -> PeakSampler:
        self._shm0 = shm_bytes()
        self.start = self.peak = self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self.sample())


def relu_task_source(elements: int) -> str:
    """A ReLU over ``elements`` float32 values (inputs and outputs alike: T = 8 bytes each), the
    elementwise task whose footprint is all copies of its tensors."""
    return (
        "import torch\nimport torch.nn as nn\n\n\n"
        "class Model(nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
        f"def get_inputs():\n    return [torch.randn({elements})]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


def honest(source: str) -> str:
    """The reference itself as a candidate (its class renamed ModelNew): an honest one, run
    with torch."""
    return re.sub(r"\bModel\b", "ModelNew", source)
