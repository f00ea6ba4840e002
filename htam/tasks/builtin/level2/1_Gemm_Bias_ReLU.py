"""Linear layer (GEMM + bias) followed by ReLU."""

import torch
import torch.nn as nn

BATCH = 2048
IN_FEATURES = 2048
OUT_FEATURES = 2048

HTAM_SMALL = {"BATCH": 33, "IN_FEATURES": 65, "OUT_FEATURES": 47}
HTAM_EXTRA = [{"BATCH": 3, "IN_FEATURES": 130, "OUT_FEATURES": 9}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
