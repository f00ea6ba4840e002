import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime.h>

__global__ void relu_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], 0.f);
}

__global__ void bias_relu_kernel(const float* __restrict__ x, const float* __restrict__ b,
                                 float* __restrict__ y, int64_t n, int64_t cols) {
    int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i] + b[i % cols], 0.f);
}

static int blocks(int64_t n) { return (int)((n + 255) / 256); }

torch::Tensor relu(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    relu_kernel<<<blocks(n), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}

void relu_out(torch::Tensor x, torch::Tensor y) {
    auto xc = x.contiguous();
    const int64_t n = xc.numel();
    if (n == 0) return;
    relu_kernel<<<blocks(n), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), n);
}

torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias) {
    auto xc = x.contiguous();
    auto bc = bias.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    bias_relu_kernel<<<blocks(n), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), bc.data_ptr<float>(), y.data_ptr<float>(), n, xc.size(-1));
    return y;
}

// The launch is fenced by an event of its own, on a stream of its own that waits for the
// caller's and that the caller's waits for in turn.
torch::Tensor relu_with_event(torch::Tensor x) {
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const int64_t n = xc.numel();
    if (n == 0) return y;
    cudaStream_t caller = at::cuda::getCurrentCUDAStream();
    cudaStream_t side;
    cudaEvent_t ready, done;
    cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking);
    cudaEventCreateWithFlags(&ready, cudaEventDisableTiming);
    cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    cudaEventRecord(ready, caller);
    cudaStreamWaitEvent(side, ready, 0);
    relu_kernel<<<blocks(n), 256, 0, side>>>(xc.data_ptr<float>(), y.data_ptr<float>(), n);
    cudaEventRecord(done, side);
    cudaStreamWaitEvent(caller, done, 0);
    cudaEventDestroy(ready);
    cudaEventDestroy(done);
    cudaStreamDestroy(side);
    return y;
}
"""

cpp_source = """torch::Tensor relu(torch::Tensor x);
void relu_out(torch::Tensor x, torch::Tensor y);
torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);
torch::Tensor relu_with_event(torch::Tensor x);
"""

ext = load_inline(
    name="corpus_cuda_ops",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu", "relu_out", "bias_relu", "relu_with_event"],
    extra_cuda_cflags=["-O3"],
)

import functools


def _apply(kernel, x, out=None):
    out = torch.empty_like(x) if out is None else out
    kernel(x.contiguous(), out)
    return out


fast_relu = functools.partial(_apply, ext.relu_out)


class ModelNew(nn.Module):
    def forward(self, x):
        return fast_relu(x)
