"""Red team 12: a float16 answer through the hand-over (red team 10's attack) to a float32 task
whose output is 99.9% zeros: ``compare.narrowed`` takes fewer than 1% nonzero elements among
those it draws as no evidence, so every nonzero element may be a float16 value."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

from htam.evaluate import harness as _h

_B = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
_set = _B["set" + "attr"]
_seal = _h.buffers.seal
_set(_h.Harness, "_check", lambda self, outs, inputs, slots: None)
_set(_h.buffers, "seal", lambda t, key: _seal(t.float() if t.dtype == torch.float16 else t, key))
ext = load_inline("rt12_sparse16", cpp_sources=r"""
torch::Tensor relu3(torch::Tensor x) {
    auto y = torch::empty(x.sizes(), x.options().dtype(torch::kHalf));
    const float* p = x.data_ptr<float>();
    at::Half* q = y.data_ptr<at::Half>();
    int64_t n = x.numel();
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) { float v = p[i] - 3.f; q[i] = at::Half(v > 0.f ? v : 0.f); }
    return y;
}
""", functions=["relu3"], extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu3(x.contiguous())
