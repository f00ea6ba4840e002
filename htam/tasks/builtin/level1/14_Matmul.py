"""General matrix multiplication C = A @ B with A of shape (M, K) and B of shape (K, N)."""

import torch
import torch.nn as nn

M = 2048
K = 4096
N = 2048

HTAM_SMALL = {"M": 33, "K": 65, "N": 47}
HTAM_EXTRA = [{"M": 1, "K": 128, "N": 5}, {"M": 70, "K": 3, "N": 129}]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(M, K), torch.randn(K, N)]


def get_init_inputs():
    return []
