"""Log-softmax over dimension 1 of a 2-D tensor (inputs scaled up to stress stability)."""

import torch
import torch.nn as nn

BATCH = 4096
DIM = 8192

HTAM_SMALL = {"BATCH": 31, "DIM": 263}
HTAM_EXTRA = [{"BATCH": 3, "DIM": 2049}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(x, dim=1)


def get_inputs():
    # A wider spread than randn makes a naive exp() overflow-prone, as real logits can be.
    return [torch.randn(BATCH, DIM) * 10.0]


def get_init_inputs():
    return []
