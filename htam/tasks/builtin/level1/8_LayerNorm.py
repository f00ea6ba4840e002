"""Layer normalization over the hidden dimension, with a learned affine transform."""

import torch
import torch.nn as nn

ROWS = 16384
HIDDEN = 2048

HTAM_SMALL = {"ROWS": 37, "HIDDEN": 257}
HTAM_EXTRA = [{"ROWS": 6, "HIDDEN": 100}]


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden, eps=1e-5)
        # Non-trivial affine parameters, so an implementation that ignores them is caught.
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(ROWS, HIDDEN) * 2.0 + 0.5]


def get_init_inputs():
    return [HIDDEN]
