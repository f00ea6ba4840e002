"""Red team 12: a clamp whose bounds no input reaches: the output is the input, and the reference
reads and writes every element."""

import torch
import torch.nn as nn

N = 1 << 22
HTAM_SMALL = {"N": 1 << 12}


class Model(nn.Module):
    def forward(self, x):
        return torch.clamp(x, -1e6, 1e6)


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
