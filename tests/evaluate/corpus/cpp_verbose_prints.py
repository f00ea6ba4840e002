import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""
#include <torch/extension.h>
#include <cmath>

torch::Tensor relu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* src = xc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
    return y;
}

void relu_out(torch::Tensor x, torch::Tensor y) {
    auto xc = x.contiguous();
    const float* src = xc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    const int64_t n = xc.numel();
    for (int64_t i = 0; i < n; ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t cols = xc.size(-1);
    const int64_t n = xc.numel();
    const float* src = xc.data_ptr<float>();
    const float* b = bc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    for (int64_t i = 0; i < n; ++i) {
        const float v = src[i] + b[i % cols];
        dst[i] = v > 0.f ? v : 0.f;
    }
    return y;
}
"""

ext = load_inline(
    name="corpus_ops",
    cpp_sources=cpp_source,
    functions=["relu", "relu_out", "bias_relu"],
    extra_cflags=["-O2"],
    verbose=True,
)

print("custom ReLU extension loaded")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        print("ModelNew: using the fused ReLU kernel")

    def forward(self, x):
        return ext.relu(x)


def get_inputs():
    return [torch.randn(4096, 8192)]


def get_init_inputs():
    return []
