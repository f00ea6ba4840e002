"""Task sources the CLI tests write to disk: one KernelBench-format ReLU, of any size."""

from __future__ import annotations

from pathlib import Path


def relu_task(rows: str, cols: str, small: str = "") -> str:
    """A KernelBench-format ReLU whose input is ``rows x cols`` float32 (``small``: an
    HTAM_SMALL line). Its signature is taken on the meta device: any size costs nothing."""
    return f"""
import torch
import torch.nn as nn

ROWS = {rows}
COLS = {cols}
{small}

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return []
"""


# 8x16: a task every command loads and runs in no time.
SMALL_RELU = relu_task("8", "16")


def write_suite(folder: Path, *names: str, source: str = SMALL_RELU) -> Path:
    """A suite directory ``folder`` holding one task file ``NAME.py`` per name (ids
    ``<folder name>/<name>``)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.py").write_text(source)
    return folder
