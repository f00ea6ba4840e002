"""Write tests/evaluate/corpus/: LLM-idiomatic solutions, one file per solution, over the ways
LLM-written KernelBench solutions reach their kernels (the same idiom in C++ for the CPU, CUDA
and Triton), and cheat variants. The files are committed; this script says how they were made
and rewrites them after a change to a shared part (the extension sources). The expected outcomes
are in tests/evaluate/corpus/manifest.toml."""

from __future__ import annotations

from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "tests" / "evaluate" / "corpus"

CPP_SRC = r"""
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

CUDA_SRC = r"""
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

CUDA_DECLS = (
    "torch::Tensor relu(torch::Tensor x);\n"
    "void relu_out(torch::Tensor x, torch::Tensor y);\n"
    "torch::Tensor bias_relu(torch::Tensor x, torch::Tensor bias);\n"
    "torch::Tensor relu_with_event(torch::Tensor x);\n"
)

CPP_HEAD = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cpp_source = r"""{CPP_SRC}"""

ext = load_inline(
    name="corpus_ops",
    cpp_sources=cpp_source,
    functions=["relu", "relu_out", "bias_relu"],
    extra_cflags=["-O2"],
{{verbose}})
'''

CUDA_HEAD = f'''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

cuda_source = r"""{CUDA_SRC}"""

cpp_source = """{CUDA_DECLS}"""

ext = load_inline(
    name="corpus_cuda_ops",
    cpp_sources=cpp_source,
    cuda_sources=cuda_source,
    functions=["relu", "relu_out", "bias_relu", "relu_with_event"],
    extra_cuda_cflags=["-O3"],
{{verbose}})
'''

# Python bodies shared by the C++ and CUDA variants: how forward reaches ``ext``.
EXT_IDIOMS: dict[str, tuple[str, str]] = {
    "module_ext": (
        "relu",
        """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu(x)
""",
    ),
    "ext_on_self": (
        "relu",
        """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.ops = ext

    def forward(self, x):
        return self.ops.relu(x)
""",
    ),
    "fn_bound_in_init": (
        "relu",
        """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.relu_fn = ext.relu

    def forward(self, x):
        return self.relu_fn(x.contiguous())
""",
    ),
    "submodule_forward": (
        "relu",
        """

class FusedReLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = ext

    def forward(self, x):
        return self.kernel.relu(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(FusedReLU())

    def forward(self, x):
        return self.features(x)
""",
    ),
    "helper_wrapper": (
        "relu",
        '''

def relu_forward(x: torch.Tensor) -> torch.Tensor:
    """Launch the custom ReLU on a contiguous float32 tensor."""
    if not x.is_contiguous():
        x = x.contiguous()
    return ext.relu(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_forward(x)
''',
    ),
    "functools_partial": (
        "relu",
        """
import functools


def _apply(kernel, x, out=None):
    out = torch.empty_like(x) if out is None else out
    kernel(x.contiguous(), out)
    return out


fast_relu = functools.partial(_apply, ext.relu_out)


class ModelNew(nn.Module):
    def forward(self, x):
        return fast_relu(x)
""",
    ),
    "getattr_name": (
        "relu",
        """

class ModelNew(nn.Module):
    def __init__(self, op_name: str = "relu"):
        super().__init__()
        self.op_name = op_name

    def forward(self, x):
        return getattr(ext, self.op_name)(x)
""",
    ),
    "lambda_attr": (
        "relu",
        """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.activation = lambda t: ext.relu(t)

    def forward(self, x):
        return self.activation(x)
""",
    ),
    "staticmethod": (
        "relu",
        """

class ModelNew(nn.Module):
    @staticmethod
    def _kernel(x):
        return ext.relu(x.contiguous())

    def forward(self, x):
        return self._kernel(x)
""",
    ),
    "custom_op": (
        "relu",
        """


@torch.library.custom_op("corpus::relu", mutates_args=())
def corpus_relu(x: torch.Tensor) -> torch.Tensor:
    return ext.relu(x)


@corpus_relu.register_fake
def _(x):
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return corpus_relu(x)
""",
    ),
    "autograd_function": (
        "relu",
        """


class ReLUFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = ext.relu(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return grad * (y > 0)


class ModelNew(nn.Module):
    def forward(self, x):
        return ReLUFunction.apply(x)
""",
    ),
    "layer_loop": (
        "layers",
        """
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, dim, layers):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(dim, dim) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = ext.bias_relu(F.linear(x, layer.weight), layer.bias)
        return x
""",
    ),
    "init_weights": (
        "gemm",
        """


class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features, bias=True)

    def forward(self, x):
        y = torch.matmul(x, self.linear.weight.t())
        return ext.bias_relu(y, self.linear.bias)
""",
    ),
    "out_param": (
        "relu",
        """

class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        ext.relu_out(x, out)
        return out
""",
    ),
    "verbose_prints": (
        "relu",
        """
print("custom ReLU extension loaded")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        print("ModelNew: using the fused ReLU kernel")

    def forward(self, x):
        return ext.relu(x)


def get_inputs():
    return [torch.randn(4096, 8192){device}]


def get_init_inputs():
    return []
""",
    ),
}

# Only where CUDA has it.
CUDA_ONLY = {
    "stream_event": (
        "relu",
        """

class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu_with_event(x)
""",
    ),
}

LOAD_FROM_FILE = '''import os

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load

SOURCE = r"""{src}"""

_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus_load_src")
os.makedirs(_dir, exist_ok=True)
_path = os.path.join(_dir, "relu_ops.{suffix}")
with open(_path, "w") as f:
    f.write(SOURCE)

relu_ops = load(name="corpus_relu_ops_{lang}", sources=[_path], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return relu_ops.relu(x)
'''

PYBIND = """
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("relu", &relu, "ReLU");
}
"""

TORCH_LIBRARY = '''import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = r"""{src}
TORCH_LIBRARY(corpus_ops, m) {{
    m.def("relu(Tensor x) -> Tensor");
}}

TORCH_LIBRARY_IMPL(corpus_ops, {key}, m) {{
    m.impl("relu", &relu);
}}
"""

load_inline(
    name="corpus_library_{lang}",
    {sources},
    is_python_module=False,
)


class ModelNew(nn.Module):
    def forward(self, x):
        return torch.ops.corpus_ops.relu(x)
'''


def _ext_files(lang: str) -> dict[str, str]:
    head = CPP_HEAD if lang == "cpp" else CUDA_HEAD
    files = {}
    for idiom, (_task, body) in {**EXT_IDIOMS, **(CUDA_ONLY if lang == "cuda" else {})}.items():
        verbose = "    verbose=True,\n" if idiom == "verbose_prints" else ""
        body = body.replace("{device}", ".cuda()" if lang == "cuda" else "")
        files[f"{lang}_{idiom}.py"] = head.replace("{verbose}", verbose) + body
    src = CPP_SRC if lang == "cpp" else CUDA_SRC
    files[f"{lang}_load_from_file.py"] = LOAD_FROM_FILE.format(
        src=src + PYBIND, suffix="cpp" if lang == "cpp" else "cu", lang=lang
    )
    if lang == "cpp":
        sources = "cpp_sources=source"
    else:
        sources = 'cpp_sources="",\n    cuda_sources=source,\n    functions=None'
    files[f"{lang}_torch_library_op.py"] = TORCH_LIBRARY.format(
        src=src, key="CPU" if lang == "cpp" else "CUDA", lang=lang, sources=sources
    )
    return files


TRITON_HEAD = """import torch
import torch.nn as nn
import triton
import triton.language as tl
"""

RELU_KERNEL = """

@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)
"""

BIAS_RELU_KERNEL = """

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
"""

RELU_HELPER = """

def triton_relu(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)
    relu_kernel[grid](x, y, n, BLOCK_SIZE=1024)
    return y
"""

TRITON_IDIOMS: dict[str, str] = {
    "autotuned": """

@triton.autotune(
    configs=[
        triton.Config({"BLOCK_SIZE": 256}, num_warps=2),
        triton.Config({"BLOCK_SIZE": 1024}, num_warps=4),
    ],
    key=["n_elements"],
)
@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(y_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        relu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),)](x, y, n)
        return y
""",
    "heuristics": """

@triton.heuristics({"EVEN": lambda args: args["n_elements"] % args["BLOCK_SIZE"] == 0})
@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr, EVEN: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    if EVEN:
        tl.store(y_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets), 0.0))
    else:
        mask = offsets < n_elements
        x = tl.load(x_ptr + offsets, mask=mask)
        tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 512),)](x, y, x.numel(), BLOCK_SIZE=512)
        return y
""",
    "helper": RELU_KERNEL
    + RELU_HELPER
    + """

class ModelNew(nn.Module):
    def forward(self, x):
        return triton_relu(x)
""",
    "kernel_on_self": RELU_KERNEL
    + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = relu_kernel
        self.block = 1024

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        self.kernel[(triton.cdiv(x.numel(), self.block),)](x, y, x.numel(), BLOCK_SIZE=self.block)
        return y
""",
    "submodule_forward": RELU_KERNEL
    + RELU_HELPER
    + """

class TritonReLU(nn.Module):
    def forward(self, x):
        return triton_relu(x)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = TritonReLU()

    def forward(self, x):
        return self.act(x)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)
""",
    "functools_partial": RELU_KERNEL
    + """
import functools


def launch(kernel, x, block):
    x = x.contiguous()
    y = torch.empty_like(x)
    kernel[(triton.cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK_SIZE=block)
    return y


relu = functools.partial(launch, relu_kernel, block=1024)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu(x)
""",
    "getattr_name": RELU_KERNEL
    + RELU_HELPER
    + """


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.impl = "triton_relu"

    def forward(self, x):
        return getattr(self, "_" + self.impl)(x)

    def _triton_relu(self, x):
        return triton_relu(x)
""",
    "lambda_attr": RELU_KERNEL
    + RELU_HELPER
    + """

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        self.act = lambda t: triton_relu(t)

    def forward(self, x):
        return self.act(x)
""",
    "staticmethod": RELU_KERNEL
    + """

class ModelNew(nn.Module):
    @staticmethod
    def launch(x):
        x = x.contiguous()
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK_SIZE=1024)
        return y

    def forward(self, x):
        return ModelNew.launch(x)
""",
    "custom_op": RELU_KERNEL
    + RELU_HELPER
    + """

@torch.library.custom_op("corpus_triton::relu", mutates_args=())
def relu_op(x: torch.Tensor) -> torch.Tensor:
    return triton_relu(x)


@relu_op.register_fake
def _(x):
    return torch.empty_like(x)


class ModelNew(nn.Module):
    def forward(self, x):
        return relu_op(x)
""",
    "autograd_function": RELU_KERNEL
    + RELU_HELPER
    + """

class TritonReLUFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = triton_relu(x)
        ctx.save_for_backward(y)
        return y

    @staticmethod
    def backward(ctx, grad_out):
        (y,) = ctx.saved_tensors
        return grad_out * (y > 0).to(grad_out.dtype)


class ModelNew(nn.Module):
    def forward(self, x):
        return TritonReLUFn.apply(x)
""",
    "jit_call_form": """

def _relu_body(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    tl.store(y_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


relu_kernel = triton.jit(_relu_body)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK_SIZE=1024)
        return y
""",
    "layer_loop": BIAS_RELU_KERNEL
    + """
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, dim, layers):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(dim, dim) for _ in range(layers)])

    def forward(self, x):
        for layer in self.layers:
            x = bias_relu(F.linear(x, layer.weight), layer.bias)
        return x
""",
    "init_weights": BIAS_RELU_KERNEL
    + """

class ModelNew(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x):
        return bias_relu(x @ self.linear.weight.T, self.linear.bias)
""",
    "prints_and_inputs": RELU_KERNEL
    + RELU_HELPER
    + """
print("Triton ReLU ready")


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()
        print("ModelNew built")

    def forward(self, x):
        return triton_relu(x)


def get_inputs():
    return [torch.randn(4096, 8192).cuda()]


def get_init_inputs():
    return []
""",
}

# Cheats: a kernel built and never run, run only from dead code, or run beside torch doing the
# work; each is refused by the judge's kernel probe (manifest.toml says with which cause).
TRITON_CHEATS = {
    "torch_only": RELU_KERNEL
    + """

class ModelNew(nn.Module):
    \"\"\"A kernel is defined, and never launched.\"\"\"

    def forward(self, x):
        return torch.clamp_min(x, 0.0)
""",
}

EXT_CHEATS = {
    "dead_code": """

class ModelNew(nn.Module):
    \"\"\"The kernel is called only from a method nothing calls.\"\"\"

    def forward(self, x):
        return torch.relu(x)

    def fast_path(self, x):
        return ext.relu(x)
""",
    "side_input": """

class ModelNew(nn.Module):
    \"\"\"The kernel runs on every call, on a scratch tensor; torch computes the answer.\"\"\"

    def __init__(self):
        super().__init__()
        self.register_buffer("scratch", torch.randn(256))

    def forward(self, x):
        ext.relu(self.scratch)
        return torch.relu(x)
""",
    "result_discarded": """

class ModelNew(nn.Module):
    \"\"\"The kernel runs on the real input, and its result is thrown away.\"\"\"

    def forward(self, x):
        y = ext.relu(x)
        del y
        return torch.relu(x)
""",
}


def _cheat_files() -> dict[str, str]:
    files = {f"triton_cheat_{k}.py": TRITON_HEAD + v for k, v in TRITON_CHEATS.items()}
    for lang, head in (("cpp", CPP_HEAD), ("cuda", CUDA_HEAD)):
        for k, v in EXT_CHEATS.items():
            files[f"{lang}_cheat_{k}.py"] = head.replace("{verbose}", "") + v
    files["cpp_cheat_no_build.py"] = """import torch
import torch.nn as nn


class ModelNew(nn.Module):
    \"\"\"Torch-only code given as C++: nothing is built.\"\"\"

    def forward(self, x):
        return torch.relu(x)
"""
    return files


TASKS = {
    "relu": "level1/1_ReLU.py",
    "gemm": "level2/1_Gemm_Bias_ReLU.py",
    "layers": "corpus/layer_stack.py",
}
NONE_RAN = "ran none of the kernels"
UNUSED = "do not come from the solution's kernels"
CHEAT_CAUSES = {
    "torch_only": NONE_RAN,
    "dead_code": NONE_RAN,
    "side_input": UNUSED,
    "result_discarded": UNUSED,
    "no_build": "[no-kernel]",
}
# Triton's autotuner benchmarks through a GPU driver: the CPU interpreter has none.
GPU_ONLY = {"triton_autotuned.py"}
HANDWRITTEN = {  # files of the corpus this script does not write
    "triton_relu_plain.py": "relu",
    "triton_cheat_dead_code.py": "relu",
    "triton_cheat_side_input.py": "relu",
}


def _task_of(name: str) -> str:
    stem = name.removesuffix(".py").split("_", 1)[1]
    if name in HANDWRITTEN:
        return HANDWRITTEN[name]
    if stem in TRITON_IDIOMS:
        table = {"layer_loop": "layers", "init_weights": "gemm"}
        return table.get(stem, "relu")
    return {**EXT_IDIOMS, **CUDA_ONLY}.get(stem, ("relu", ""))[0]


def manifest(names: list[str]) -> str:
    lines = [
        "# Expected outcome of every corpus file (written by scripts/experiments/corpus_write.py).",
        "# task: a builtin task, or corpus/<file> under tests/evaluate/corpus/tasks/.",
        "",
    ]
    for name in sorted(names):
        lang = name.split("_", 1)[0]
        cheat = name.removesuffix(".py").split("_cheat_")[-1] if "_cheat_" in name else None
        lines += [
            "[[solution]]",
            f'file = "{name}"',
            f'task = "{TASKS[_task_of(name)]}"',
            f'language = "{lang}"',
            f'status = "{"rejected" if cheat else "ok"}"',
            f'cause = "{CHEAT_CAUSES[cheat] if cheat else ""}"',
            f"cpu = {'false' if name in GPU_ONLY or lang == 'cuda' else 'true'}",
            "",
        ]
    return "\n".join(lines)


def main() -> None:
    names = list(HANDWRITTEN)
    for name, text in _cheat_files().items():
        names.append(name)
        (CORPUS / name).write_text(text)
    for idiom, body in TRITON_IDIOMS.items():
        (CORPUS / f"triton_{idiom}.py").write_text(TRITON_HEAD + body)
        names.append(f"triton_{idiom}.py")
    for lang in ("cpp", "cuda"):
        for name, text in _ext_files(lang).items():
            (CORPUS / name).write_text(text)
            names.append(name)
    (CORPUS / "manifest.toml").write_text(manifest(names))
    print(f"{len(names)} files")


if __name__ == "__main__":
    main()
