"""Two-layer feed-forward block: Linear, GELU, Linear (the transformer MLP)."""

import torch
import torch.nn as nn

TOKENS = 4096
D_MODEL = 1024
D_HIDDEN = 4096

HTAM_SMALL = {"TOKENS": 37, "D_MODEL": 48, "D_HIDDEN": 130}
HTAM_EXTRA = [{"TOKENS": 5, "D_MODEL": 17, "D_HIDDEN": 64}]


class Model(nn.Module):
    def __init__(self, d_model: int, d_hidden: int):
        super().__init__()
        self.fc1 = nn.Linear(d_model, d_hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(d_hidden, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def get_inputs():
    return [torch.randn(TOKENS, D_MODEL)]


def get_init_inputs():
    return [D_MODEL, D_HIDDEN]
