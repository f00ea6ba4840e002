"""GELU (exact, erf form) over a 2-D activation."""

import torch
import torch.nn as nn

BATCH = 4096
DIM = 8192

HTAM_SMALL = {"BATCH": 33, "DIM": 257}
HTAM_EXTRA = [{"BATCH": 5, "DIM": 1000}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return []
