"""Tasks outside KernelBench that the offline proposer must get right (tests/offline/fixtures):
``models/``, whole models in level-3 style; ``variants/``, odd shapes of level 1-2 families
(non-powers of two, a dim of 1, tall rows, odd convolution settings, reductions over leading
and middle dims). Each file is a KernelBench source at its own (small) sizes."""

from __future__ import annotations

from pathlib import Path

from htam.tasks.task import Task

ROOT = Path(__file__).resolve().parent / "fixtures"
MODELS = sorted(p.stem for p in (ROOT / "models").glob("*.py"))
VARIANTS = sorted(p.stem for p in (ROOT / "variants").glob("*.py"))


def fixture_task(kind: str, stem: str) -> Task:
    """The fixture ``kind``/``stem`` (kind: models or variants) as a task."""
    source = (ROOT / kind / f"{stem}.py").read_text()
    return Task(id=f"fixtures/{kind}/{stem}", name=stem, source=source)
