"""Maximum values of a 3-D tensor over its middle dimension."""

import torch
import torch.nn as nn

BATCH = 128
DIM1 = 512
DIM2 = 512
REDUCE_DIM = 1

HTAM_SMALL = {"BATCH": 3, "DIM1": 37, "DIM2": 65}
HTAM_EXTRA = [{"BATCH": 2, "DIM1": 130, "DIM2": 7}]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.max(x, dim=self.dim).values


def get_inputs():
    return [torch.randn(BATCH, DIM1, DIM2)]


def get_init_inputs():
    return [REDUCE_DIM]
