import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# Build settings written into the environment before the build, as LLM solutions do (the
# architecture list matters only to CUDA builds; a C++ build ignores it).
os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "9.0")
os.environ["MAX_JOBS"] = "2"

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

ext = load_inline(name="corpus_build_env", cpp_sources=cpp_source, functions=["relu_fwd"])


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ext.relu_fwd(x)
