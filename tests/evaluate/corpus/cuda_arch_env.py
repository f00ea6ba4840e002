import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The toolchain and the architecture list set in the environment before the build, the way
# LLM solutions write it (setdefault keeps the evaluator's list when it set one).
if os.path.isdir("/usr/local/cuda"):
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
if torch.cuda.is_available():
    major, minor = torch.cuda.get_device_capability()
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", f"{major}.{minor}")

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu_fwd(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    relu_kernel<<<(int)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

ext = load_inline(
    name="corpus_arch_env",
    cpp_sources="torch::Tensor relu_fwd(torch::Tensor x);",
    cuda_sources=cuda_source,
    functions=["relu_fwd"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_fwd(x)
