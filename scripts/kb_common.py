"""What the scripts of device/ and experiments/ share: where KernelBench is (``$KB_ROOT``, else the
copy carried to the device machine, ``.kb/``, else the shared checkout beside the repository), its
tasks, one timed call, one result row, and a solution file imported as a module. A script adds
this folder to ``sys.path`` to import it."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import IO

import torch

from htam.tasks.task import Task

ROOT = Path(__file__).resolve().parents[1]


def kernelbench_root() -> Path:
    if "KB_ROOT" in os.environ:
        return Path(os.environ["KB_ROOT"])
    places = (ROOT / ".kb/kernelbench/KernelBench", ROOT.parent / "shared/kernelbench/KernelBench")
    return next(p for p in places if p.exists())


def kb_task(path: Path) -> Task:
    """The task of a KernelBench file, with the id the offline check and the bench use."""
    level = int(path.parent.name.removeprefix("level"))
    return Task(
        f"kernelbench/{path.parent.name}/{path.stem}", path.stem, path.read_text(), path, level
    )


def kb_paths(levels=(1, 2)) -> list[Path]:
    """The task files of ``levels``, in level and task-number order."""
    root = kernelbench_root()
    return [
        p
        for lv in levels
        for p in sorted((root / f"level{lv}").glob("*.py"), key=lambda p: int(p.stem.split("_")[0]))
    ]


def timer(device: str) -> Callable[[Callable, list], float]:
    """One call's milliseconds: CUDA events after an L2 flush on the GPU, the wall clock on the
    CPU."""
    if device != "cuda":

        def wall(fn: Callable, args: list) -> float:
            t0 = time.perf_counter()
            fn(*args)
            return (time.perf_counter() - t0) * 1e3

        return wall
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")

    def events(fn: Callable, args: list) -> float:
        flush.sum(dtype=torch.int64)
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(*args)
        b.record()
        b.synchronize()
        return a.elapsed_time(b)

    return events


def write_row(f: IO[str], row: dict, digits: int = 4) -> None:
    """One JSON line into ``f`` (flushed: a killed run keeps it) and, rounded, onto stdout."""
    f.write(json.dumps(row) + "\n")
    f.flush()
    shown = {k: round(v, digits) if isinstance(v, float) else v for k, v in row.items()}
    print(json.dumps(shown), flush=True)


def load_solution(code: str) -> types.ModuleType:
    """A solution's code imported as a module from a real file (Triton reads its kernels' source
    from the file that defines them)."""
    digest = hashlib.sha1(code.encode()).hexdigest()[:16]
    path = Path(tempfile.gettempdir()) / "htam_script_solutions" / f"sol_{digest}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(code)
    spec = importlib.util.spec_from_file_location(f"htam_solution_{digest}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
