import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# The build in a try block, the handle left None when it fails, and a bare except around the
# call: how LLMs often guard a kernel (the kernel does handle the task's inputs).
cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

torch::Tensor relu_fwd(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "float32 CUDA tensors only");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    relu_kernel<<<(int)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""

cpp_source = "torch::Tensor relu_fwd(torch::Tensor x);"

relu_ext = None
try:
    relu_ext = load_inline(
        name="corpus_cuda_try_fallback",
        cpp_sources=cpp_source,
        cuda_sources=cuda_source,
        functions=["relu_fwd"],
        extra_cuda_cflags=["-O3"],
    )
except Exception as e:
    print(f"CUDA extension compilation failed, falling back to PyTorch implementation: {e}")


class ModelNew(nn.Module):
    def forward(self, x):
        if relu_ext is not None and x.is_cuda and x.dtype == torch.float32:
            try:
                return relu_ext.relu_fwd(x)
            except:
                pass
        return torch.relu(x)
