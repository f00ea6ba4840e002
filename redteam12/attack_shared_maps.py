"""Red team 12: writable shared mappings inherited from the fork server (which forks the reference's
runner too): a write to one would reach the reference's process."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

ext = load_inline("rt12_maps", cpp_sources=r"""
torch::Tensor relu(torch::Tensor x) { return torch::relu(x); }
""", functions=["relu"])

for line in open("/proc/self/maps"):
    perms = line.split()[1]
    if perms[3] == "s":
        print("SHARED", line.strip())


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
