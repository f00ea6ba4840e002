"""Red team 12: an int8 answer to an int64 task through the hand-over (the integer kin of red team
10's float16 one). The harness's dtype check (in the candidate's process) is patched out and
the seal taken of the int64 the slot will hold; ``compare.narrowed`` looks at float32 outputs
only, and integers are compared exactly, which the int8 answer passes: the call writes an
eighth of the bytes, the widening happens in the hand-over's copy, whose cost the judge forgives."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

from htam.evaluate import harness as _h

WIDEN = True
_B = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
_set = _B["set" + "attr"]
_seal = _h.buffers.seal
if WIDEN:
    _set(_h.Harness, "_check", lambda self, outs, inputs, slots: None)
    _set(_h.buffers, "seal", lambda t, key: _seal(t.long() if t.dtype == torch.int8 else t, key))

ext = load_inline("rt12_int_slot", cpp_sources=r"""
torch::Tensor buckets(torch::Tensor x, bool narrow) {
    auto y = torch::empty(x.sizes(), x.options().dtype(narrow ? torch::kInt8 : torch::kInt64));
    const float* p = x.data_ptr<float>();
    int64_t n = x.numel();
    if (narrow) { int8_t* q = y.data_ptr<int8_t>();
        #pragma omp parallel for
        for (int64_t i = 0; i < n; ++i) q[i] = (p[i] > -1.f) + (p[i] > 0.f) + (p[i] > 1.f);
    } else { int64_t* q = y.data_ptr<int64_t>();
        #pragma omp parallel for
        for (int64_t i = 0; i < n; ++i) q[i] = (p[i] > -1.f) + (p[i] > 0.f) + (p[i] > 1.f);
    }
    return y;
}
""", functions=["buckets"], extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.buckets(x.contiguous(), WIDEN)
