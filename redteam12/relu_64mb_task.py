import torch
import torch.nn as nn


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


N = 1 << 24  # 64 MB: the seal (SHA-256, ~1.4 GB/s) costs several ReLUs
HTAM_SMALL = {"N": 1 << 12}


def get_inputs():
    return [torch.randn(N)]


def get_init_inputs():
    return []
