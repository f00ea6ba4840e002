import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(x_ptr, b_ptr, y_ptr, n_elements, cols, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets % cols, mask=mask)
    tl.store(y_ptr + offsets, tl.maximum(x + b, 0.0), mask=mask)


def bias_relu(x, bias):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    bias_relu_kernel[(triton.cdiv(n, 1024),)](x, bias, y, n, x.shape[-1], BLOCK_SIZE=1024)
    return y


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return bias_relu(x @ self.linear.weight.T, self.linear.bias)
