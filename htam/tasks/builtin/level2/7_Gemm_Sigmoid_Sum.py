"""Linear layer, sigmoid, then a sum over the output features (GEMM with a reducing epilogue)."""

import torch
import torch.nn as nn

BATCH = 2048
IN_FEATURES = 2048
OUT_FEATURES = 2048

HTAM_SMALL = {"BATCH": 31, "IN_FEATURES": 65, "OUT_FEATURES": 53}
HTAM_EXTRA = [{"BATCH": 2, "IN_FEATURES": 17, "OUT_FEATURES": 200}]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.linear(x)).sum(dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
