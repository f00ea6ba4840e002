"""Gated linear unit (SwiGLU): silu(x @ W_gate^T) * (x @ W_up^T), two GEMMs and a gate."""

import torch
import torch.nn as nn

BATCH = 2048
IN_FEATURES = 2048
HIDDEN = 2048

HTAM_SMALL = {"BATCH": 23, "IN_FEATURES": 65, "HIDDEN": 71}
HTAM_EXTRA = [{"BATCH": 4, "IN_FEATURES": 33, "HIDDEN": 130}]


class Model(nn.Module):
    def __init__(self, in_features: int, hidden: int):
        super().__init__()
        self.gate = nn.Linear(in_features, hidden, bias=False)
        self.up = nn.Linear(in_features, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.silu(self.gate(x)) * self.up(x)


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, HIDDEN]
