"""Red team 12: "outputs must not alias an input" is checked by the harness, in the candidate's own
process: patched out, the lent input itself is returned (the clamp is the identity on every
input the judge draws, outliers and shifts too), the call does nothing, and the hand-over's
copy, whose cost the judge forgives, is all the work."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

from htam.evaluate import harness as _h

ALIAS = False
_B = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
_set = _B["set" + "attr"]
if ALIAS:
    _set(_h, "_overlaps", lambda a, b: False)
ext = load_inline("rt12_return_copy", cpp_sources=r"""
torch::Tensor clamp(torch::Tensor x, bool alias) {
    if (alias) return x;
    auto y = torch::empty_like(x);
    const float* p = x.data_ptr<float>(); float* q = y.data_ptr<float>();
    int64_t n = x.numel();
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) q[i] = p[i] < -1e6f ? -1e6f : (p[i] > 1e6f ? 1e6f : p[i]);
    return y;
}
""", functions=["clamp"], extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.clamp(x, ALIAS)
