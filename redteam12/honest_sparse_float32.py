"""Red team 12, the honest float32 answer for comparison with attack_sparse_float16.py (was: a float16 answer through the hand-over (red team 10's attack) to a float32 task
whose output is 99.9% zeros: ``compare.narrowed`` takes fewer than 1% nonzero elements among
those it draws as no evidence, so every nonzero element may be a float16 value."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

from htam.evaluate import harness as _h

_B = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
_set = _B["set" + "attr"]
_seal = _h.buffers.seal
ext = load_inline("rt12_sparse32", cpp_sources=r"""
torch::Tensor relu3(torch::Tensor x) {
    auto y = torch::empty(x.sizes(), x.options().dtype(torch::kFloat));
    const float* p = x.data_ptr<float>();
    float* q = y.data_ptr<float>();
    int64_t n = x.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { float v = p[i] - 3.f; q[i] = v > 0.f ? v : 0.f; }
    return y;
}
""", functions=["relu3"], extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu3(x.contiguous())
