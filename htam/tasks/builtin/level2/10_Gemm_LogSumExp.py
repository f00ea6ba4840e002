"""Matrix multiplication followed by a log-sum-exp over the columns (row-wise reduction)."""

import torch
import torch.nn as nn

M = 2048
K = 2048
N = 4096

HTAM_SMALL = {"M": 27, "K": 40, "N": 259}
HTAM_EXTRA = [{"M": 3, "K": 8, "N": 1031}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(a @ b, dim=1)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
