import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Layers registered with setattr under computed names and read back with getattr, the kernel
# run once per layer (each layer's shift is zero, so the stack is one ReLU).
cpp_source = r"""
#include <torch/extension.h>

torch::Tensor shift_relu(torch::Tensor x, torch::Tensor shift) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float s = shift.item<float>();
    const float* src = xc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) {
        const float v = src[i] + s;
        dst[i] = v > 0.f ? v : 0.f;
    }
    return y;
}
"""

ext = load_inline(name="corpus_setattr_layers", cpp_sources=cpp_source, functions=["shift_relu"])


class ModelNew(nn.Module):
    def __init__(self, layers: int = 2):
        super().__init__()
        self.layers = layers
        for i in range(layers):
            setattr(self, f"shift{i}", nn.Parameter(torch.zeros(1), requires_grad=False))

    def forward(self, x):
        for i in range(self.layers):
            x = ext.shift_relu(x, getattr(self, f"shift{i}"))
        return x
