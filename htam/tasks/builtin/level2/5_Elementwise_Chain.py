"""A chain of elementwise ops: affine, swish gate, clamp (one read and one write suffice)."""

import torch
import torch.nn as nn

BATCH = 4096
DIM = 8192
ALPHA = 1.7
BETA = -0.3

HTAM_SMALL = {"BATCH": 33, "DIM": 257}
HTAM_EXTRA = [{"BATCH": 2, "DIM": 3001}]


class Model(nn.Module):
    def __init__(self, alpha: float, beta: float):
        super().__init__()
        self.alpha = alpha
        self.beta = beta

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.alpha + self.beta
        y = y * torch.sigmoid(y)
        return torch.clamp(y, min=-1.0, max=2.0)


def get_inputs():
    return [torch.randn(BATCH, DIM)]


def get_init_inputs():
    return [ALPHA, BETA]
