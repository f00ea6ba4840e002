"""Residual add followed by layer normalization (the post-norm transformer pattern)."""

import torch
import torch.nn as nn

ROWS = 16384
HIDDEN = 1024

HTAM_SMALL = {"ROWS": 19, "HIDDEN": 257}
HTAM_EXTRA = [{"ROWS": 5, "HIDDEN": 72}]


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.norm(x + residual)


def get_inputs():
    return [torch.randn(ROWS, HIDDEN), torch.randn(ROWS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
