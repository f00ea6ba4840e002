"""Where the GPU scripts find KernelBench: ``$KB_ROOT``, else the copy carried to the device
machine (``.kb/``), else the shared checkout beside the repository."""

from __future__ import annotations

import os
from pathlib import Path

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
