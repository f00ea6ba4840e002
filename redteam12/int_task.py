"""Red team 12: a large int64 output whose values fit in one byte (a bucket index)."""

import torch
import torch.nn as nn

N = 1 << 22
HTAM_SMALL = {"N": 1 << 12}


class Model(nn.Module):
    def forward(self, x):
        return (x > -1).long() + (x > 0).long() + (x > 1).long()


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
