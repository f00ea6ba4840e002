"""Red team 12: every element 0. The first ROWS elements are zero to float32 precision, so the
judge's second opinion (exact.py) judges them against float64, where 0 is exact; and it lets the
other elements (the softmax) off when each is within 10x the float32 reference's *worst*
rounding error anywhere in the output, which is the centred sums' (about 1e-3, above every
softmax value): the softmax is never computed."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = r"""
torch::Tensor answer(torch::Tensor x) {
    return torch::zeros({x.size(0) + x.numel()}, x.options());
}
"""
ext = load_inline("rt12_exact_slack", cpp_sources=SOURCE, functions=["answer"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.answer(x)
