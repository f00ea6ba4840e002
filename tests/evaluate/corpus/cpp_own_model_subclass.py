import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The solution keeps a copy of the reference class under its own name Model and subclasses it,
# replacing forward with its kernel: the name is the solution's own, not the reference's.
cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* src = xc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
    return y;
}
"""

relu_ext = load_inline(name="corpus_own_model", cpp_sources=cpp_source, functions=["relu_fwd"])


class Model(nn.Module):
    """Simple model that performs a ReLU activation."""

    def __init__(self):
        super(Model, self).__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x)


class ModelNew(Model):
    def __init__(self):
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return relu_ext.relu_fwd(x)
