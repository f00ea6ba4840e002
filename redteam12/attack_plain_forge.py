"""Red team 12, for comparison with attack_seal_overlap.py: the honest ReLU of honest_relu_cpp.py
reporting the same 0.3 ms per call (the harness's send patched), the seal left as it is."""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

from htam.evaluate import harness as _h

_B = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
_set = _B["set" + "attr"]
ext = load_inline("rt12_plain_forge", cpp_sources=r"""
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    const float* p = x.data_ptr<float>(); float* q = y.data_ptr<float>();
    int64_t n = x.numel();
    #pragma omp parallel for simd
    for (int64_t i = 0; i < n; ++i) q[i] = p[i] > 0.f ? p[i] : 0.f;
    return y;
}
""", functions=["relu"], extra_cflags=["-O3", "-fopenmp"], extra_ldflags=["-fopenmp"])
_send = _h.Harness.send


def send(self, message):
    if message.get("type") == "done" and message.get("seals"):
        message = {**message, "ms": min(message["ms"], 0.3)}
    return _send(self, message)


_set(_h.Harness, "send", send)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x.contiguous())
