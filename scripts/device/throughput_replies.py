"""Replies for the throughput bench (scripts/device/gpu_throughput.py): for each of 16 KernelBench
level-1 tasks, four distinct solutions of the kind an LLM writes (CUDA through load_inline in
several shapes, and one Triton kernel for the elementwise tasks), each correct, each a fresh
build. ``replies(tasks)`` gives the replay server's script, matched per task by a line of the
task's source that no other chosen task has."""

from __future__ import annotations

from pathlib import Path

# elementwise tasks: the op on a float ``v`` in CUDA, and in Triton (``v`` a block, tl as tl)
ELEMENTWISE = {
    "19_ReLU": ("fmaxf(v, 0.f)", "tl.maximum(v, 0.0)"),
    "20_LeakyReLU": ("v > 0.f ? v : 0.01f * v", "tl.where(v > 0, v, 0.01 * v)"),
    "21_Sigmoid": ("1.f / (1.f + expf(-v))", "1.0 / (1.0 + tl.exp(-v))"),
    "22_Tanh": ("tanhf(v)", "2.0 / (1.0 + tl.exp(-2.0 * v)) - 1.0"),
    "25_Swish": ("v / (1.f + expf(-v))", "v / (1.0 + tl.exp(-v))"),
    "26_GELU_": (
        "0.5f * v * (1.f + erff(v * 0.7071067811865476f))",
        "0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))",
    ),
    "27_SELU_": (
        "1.0507009873554805f * (v > 0.f ? v : 1.6732632423543772f * (expf(v) - 1.f))",
        "1.0507009873554805 * tl.where(v > 0, v, 1.6732632423543772 * (tl.exp(v) - 1.0))",
    ),
    "28_HardSigmoid": (
        "fminf(fmaxf(v / 6.f + 0.5f, 0.f), 1.f)",
        "tl.minimum(tl.maximum(v / 6.0 + 0.5, 0.0), 1.0)",
    ),
    "29_Softplus": (
        "v > 20.f ? v : log1pf(expf(v))",
        "tl.where(v > 20.0, v, tl.log(1.0 + tl.exp(tl.minimum(v, 20.0))))",
    ),
    "30_Softsign": ("v / (1.f + fabsf(v))", "v / (1.0 + tl.abs(v))"),
    "31_ELU": ("v > 0.f ? v : (expf(v) - 1.f)", "tl.where(v > 0, v, tl.exp(v) - 1.0)"),
    "32_HardTanh": ("fminf(fmaxf(v, -1.f), 1.f)", "tl.minimum(tl.maximum(v, -1.0), 1.0)"),
}
# row-wise tasks over dim 1 of a 2-D input: (row statistic's accumulation, its finish, the op)
ROWWISE = {
    "23_Softmax": "softmax",
    "24_LogSoftmax": "logsoftmax",
    "38_L1Norm_": "l1",
    "39_L2Norm_": "l2",
}
TASKS = list(ELEMENTWISE) + list(ROWWISE)

_CPP = "torch::Tensor forward(torch::Tensor x);"


def _module(name: str, cuda: str, flags: list[str]) -> str:
    return f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""
#include <torch/extension.h>
#include <cuda_runtime.h>
{cuda}
"""

cpp_source = "{_CPP}"

ext = load_inline(
    name="{name}",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["forward"],
    extra_cuda_cflags={flags!r},
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        return ext.forward(x.contiguous())
'''


def _elementwise_cuda(op: str, step: int) -> str:
    threads = (256, 512, 1024, 256)[step]
    if step == 1:  # float4 loads and stores, a scalar tail
        return f"""
__device__ __forceinline__ float f(float v) {{ return {op}; }}
__global__ void k4(const float4* __restrict__ x, float4* __restrict__ y, int64_t n4) {{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n4;
         i += (int64_t)gridDim.x * blockDim.x) {{
        float4 a = x[i];
        a.x = f(a.x); a.y = f(a.y); a.z = f(a.z); a.w = f(a.w);
        y[i] = a;
    }}
}}
__global__ void tail(const float* x, float* y, int64_t s, int64_t n) {{
    int64_t i = s + threadIdx.x;
    if (i < n) y[i] = f(x[i]);
}}
torch::Tensor forward(torch::Tensor x) {{
    auto y = torch::empty_like(x);
    int64_t n = x.numel(), n4 = n / 4;
    int blocks = (int)std::min<int64_t>((n4 + {threads} - 1) / {threads}, 65535 * 8);
    if (n4) k4<<<blocks, {threads}>>>((const float4*)x.data_ptr<float>(),
                                      (float4*)y.data_ptr<float>(), n4);
    if (n % 4) tail<<<1, 4>>>(x.data_ptr<float>(), y.data_ptr<float>(), n4 * 4, n);
    return y;
}}
"""
    unroll = "#pragma unroll 4" if step >= 2 else ""
    return f"""
__global__ void act(const float* __restrict__ x, float* __restrict__ y, int64_t n) {{
    {unroll}
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {{
        float v = __ldg(x + i);
        y[i] = {op};
    }}
}}
torch::Tensor forward(torch::Tensor x) {{
    auto y = torch::empty_like(x);
    int64_t n = x.numel();
    int blocks = (int)std::min<int64_t>((n + {threads} - 1) / {threads}, 1 << 20);
    act<<<blocks, {threads}>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}}
"""


def _triton(op: str, step: int) -> str:
    block = (1024, 2048, 4096, 8192)[step]
    return f"""import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def act_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, {op}, mask=mask)


class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        act_kernel[(triton.cdiv(n, {block}),)](x, y, n, BLOCK={block})
        return y
"""


_ROW = {
    "softmax": ("m = fmaxf(m, v); s = s * expf(m_old - m) + expf(v - m);", "expf(v - m) / s"),
    "logsoftmax": ("m = fmaxf(m, v); s = s * expf(m_old - m) + expf(v - m);", "v - m - logf(s)"),
    "l1": ("s += fabsf(v);", "v / (s / (float)cols)"),
    "l2": ("s += v * v;", "v / sqrtf(s)"),
}


def _rowwise_cuda(kind: str, step: int) -> str:
    threads = (256, 512, 1024, 128)[step]
    acc, out = _ROW[kind]
    online = "m_old" in acc
    merge = (
        "float mo = __shfl_xor_sync(0xffffffff, m, o), so = __shfl_xor_sync(0xffffffff, s, o);"
        " float mn = fmaxf(m, mo); s = s * expf(m - mn) + so * expf(mo - mn); m = mn;"
        if online
        else "s += __shfl_xor_sync(0xffffffff, s, o);"
    )
    smerge = (
        "float mn = fmaxf(m, sm[w]); s = s * expf(m - mn) + ss[w] * expf(sm[w] - mn); m = mn;"
        if online
        else "s += ss[w];"
    )
    return f"""
__global__ void rows(const float* __restrict__ x, float* __restrict__ y, int64_t cols) {{
    const float* xr = x + blockIdx.x * cols;
    float* yr = y + blockIdx.x * cols;
    float m = -INFINITY, s = 0.f;
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {{
        float v = xr[j]; float m_old = m; (void)m_old;
        {acc}
    }}
    for (int o = 16; o > 0; o >>= 1) {{ {merge} }}
    __shared__ float sm[32], ss[32];
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {{ sm[warp] = m; ss[warp] = s; }}
    __syncthreads();
    if (threadIdx.x == 0) {{
        m = sm[0]; s = ss[0];
        for (int w = 1; w < blockDim.x / 32; ++w) {{ {smerge} }}
        sm[0] = m; ss[0] = s;
    }}
    __syncthreads();
    m = sm[0]; s = ss[0];
    for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) {{
        float v = xr[j];
        yr[j] = {out};
    }}
}}
torch::Tensor forward(torch::Tensor x) {{
    auto y = torch::empty_like(x);
    int64_t rows_n = x.size(0), cols = x.numel() / rows_n;
    rows<<<rows_n, {threads}>>>(x.data_ptr<float>(), y.data_ptr<float>(), cols);
    return y;
}}
"""


def solution(task: str, step: int, language: str = "cuda") -> str:
    """Step ``step`` (0-3) of ``task``: a distinct, correct solution in ``language`` (triton:
    the elementwise tasks only)."""
    flags = [["-O3"], ["-O3", "--use_fast_math"], ["-O3", "-lineinfo"], ["-O2"]][step]
    name = f"{task.split('_', 1)[1].strip('_').lower()}_s{step}"
    if task in ELEMENTWISE:
        cuda_op, triton_op = ELEMENTWISE[task]
        if language == "triton":
            return _triton(triton_op, step)
        return _module(name, _elementwise_cuda(cuda_op, step), flags)
    return _module(name, _rowwise_cuda(ROWWISE[task], step), flags)


def _marker(source: str, others: list[str]) -> str:
    lines = sorted({ln.strip() for ln in source.splitlines() if ln.strip()}, key=len, reverse=True)
    return next(ln for ln in lines if not any(ln in o for o in others))


def replies(root: Path, tasks: list[str], steps: int = 4, language: str = "cuda") -> list[dict]:
    sources = {t: (root / "level1" / f"{t}.py").read_text() for t in tasks}
    out = []
    for t in tasks:
        marker = _marker(sources[t], [s for u, s in sources.items() if u != t])
        for step in range(steps):
            code = solution(t, step, language)
            out.append({"when": marker, "content": f"```python\n{code}```"})
    return out
