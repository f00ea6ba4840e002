"""Red team 12: the honest answer to cancel_softmax_task.py (ATen from C++), for comparison."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
torch::Tensor answer(torch::Tensor x) {
    auto c = (x - x.mean(1, true)).sum(1);
    return torch::cat({c, torch::softmax(x, 1).reshape(-1)});
}
"""
ext = load_inline("rt12_honest_cancel", cpp_sources=SOURCE, functions=["answer"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.answer(x)
