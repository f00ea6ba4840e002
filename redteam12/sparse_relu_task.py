"""Red team 12: a ReLU whose output is 99.9% zeros (the inputs less 3)."""

import torch
import torch.nn as nn

N = 1 << 22
HTAM_SMALL = {"N": 1 << 17}  # about 170 nonzero elements


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x - 3.0)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
