import torch
import torch.nn as nn
import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers

# Written in the style of torch's generated code, as KernelLLM writes its kernels: inductor's
# device helpers and dynamo's C guards, no compiler anywhere.
assert_size_stride = torch._C._dynamo.guards.assert_size_stride
empty_strided_cpu = torch._C._dynamo.guards._empty_strided_cpu
empty_strided_cuda = torch._C._dynamo.guards._empty_strided_cuda


@triton.jit
def triton_poi_fused_relu_0(in_ptr0, out_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
    xindex = xoffset + tl.arange(0, XBLOCK)[:]
    xmask = xindex < xnumel
    tmp0 = tl.load(in_ptr0 + xindex, xmask)
    tmp1 = tl.full([1], 0, tl.float32)
    tmp2 = triton_helpers.maximum(tmp1, tmp0)
    tl.store(out_ptr0 + xindex, tmp2, xmask)


def call(args):
    (arg0_1,) = args
    args.clear()
    rows, cols = arg0_1.shape
    assert_size_stride(arg0_1, (rows, cols), (cols, 1))
    empty = empty_strided_cuda if arg0_1.is_cuda else empty_strided_cpu
    buf0 = empty((rows, cols), (cols, 1), torch.float32)
    xnumel = rows * cols
    triton_poi_fused_relu_0[(triton.cdiv(xnumel, 1024),)](arg0_1, buf0, xnumel, XBLOCK=1024)
    del arg0_1
    return (buf0,)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, input_0):
        output = call([input_0.contiguous()])
        return output[0]
