"""Broadcast bias add followed by tanh-approximated GELU."""

import torch
import torch.nn as nn

BATCH = 4096
DIM = 8192

HTAM_SMALL = {"BATCH": 33, "DIM": 257}
HTAM_EXTRA = [{"BATCH": 7, "DIM": 90}]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(dim) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x + self.bias, approximate="tanh")


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [DIM]
