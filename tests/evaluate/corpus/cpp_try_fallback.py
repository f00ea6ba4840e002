import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# An LLM habit: the build in a try block with a module-level flag, and a torch path kept for
# inputs the kernel does not handle (the kernel does handle the task's inputs).
cpp_source = r"""
#include <torch/extension.h>

torch::Tensor relu_fwd(torch::Tensor x) {
    TORCH_CHECK(x.scalar_type() == torch::kFloat, "float32 only");
    auto xc = x.contiguous();
    auto y = torch::empty_like(xc);
    const float* src = xc.data_ptr<float>();
    float* dst = y.data_ptr<float>();
    for (int64_t i = 0; i < xc.numel(); ++i) dst[i] = src[i] > 0.f ? src[i] : 0.f;
    return y;
}
"""

try:
    relu_ext = load_inline(
        name="corpus_try_fallback",
        cpp_sources=cpp_source,
        functions=["relu_fwd"],
        verbose=False,
    )
    HAS_EXT = True
except Exception as err:
    print(f"extension build failed, using torch: {err}")
    relu_ext = None
    HAS_EXT = False


class ModelNew(nn.Module):
    def forward(self, x):
        if HAS_EXT and x.dtype == torch.float32:
            try:
                return relu_ext.relu_fwd(x)
            except RuntimeError:
                pass
        return torch.relu(x)
