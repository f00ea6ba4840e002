"""Red team 12: a reported time of NaN (or -1, or inf) on the first timed call, so that min()
and max() over the samples (Python's, where every comparison with NaN is False) drop the
judge's floors and the escape charge, and a tiny time on the others."""

import math

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

from htam.evaluate import harness as _h

_B = __builtins__ if isinstance(__builtins__, dict) else __builtins__.__dict__
_set = _B["set" + "attr"]
ext = load_inline("rt12_nan_time", cpp_sources=r"""
torch::Tensor relu(torch::Tensor x) { return torch::relu(x); }
""", functions=["relu"])
_send = _h.Harness.send
STATE = {"n": 0}


def send(self, message):
    if message.get("type") == "done" and message.get("seals"):
        STATE["n"] += 1
        message = {**message, "ms": math.nan if STATE["n"] % 2 else 1e-6}
    return _send(self, message)


_set(_h.Harness, "send", send)


class ModelNew(nn.Module):
    def forward(self, x):
        return ext.relu(x)
