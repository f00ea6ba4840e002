"""Red team 12: an output whose first elements are exactly 0 in exact arithmetic (a centred
row's sum, float32 rounding noise of about 1e-3) beside a softmax's (values below 1e-3)."""

import torch
import torch.nn as nn

ROWS = 64
N = 1 << 16
HTAM_SMALL = {"ROWS": 16, "N": 1 << 16}  # the same noise at the small size


class Model(nn.Module):
    def forward(self, x):
        centred = (x - x.mean(dim=1, keepdim=True)).sum(dim=1)  # 0, to float32's noise
        return torch.cat([centred, torch.softmax(x, dim=1).reshape(-1)])


def get_inputs():
    return [torch.randn(ROWS, N)]


def get_init_inputs():
    return []
