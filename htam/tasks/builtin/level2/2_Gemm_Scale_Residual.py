"""Square linear layer whose output is scaled and added back to its input (residual)."""

import torch
import torch.nn as nn

BATCH = 2048
FEATURES = 2048
SCALE = 0.5

HTAM_SMALL = {"BATCH": 29, "FEATURES": 67}
HTAM_EXTRA = [{"BATCH": 4, "FEATURES": 130}]


class Model(nn.Module):
    def __init__(self, features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale + x


def get_inputs():
    return [torch.randn(BATCH, FEATURES)]


def get_init_inputs():
    return [FEATURES, SCALE]
