"""The convolution family: one convolution or transposed convolution module of a forward
input."""

from __future__ import annotations

import torch

from htam.offline.front.lower import CNode
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import ConvIR

CONV_OPS = ("conv",)


def match_conv(out: CNode, convs: list[CNode]) -> tuple[ConvIR, str]:
    """(ir, summary) when ``out`` is one convolution module applied to a float32 forward input."""
    conv = convs[0]
    if len(convs) > 1 or out is not conv:
        raise NoMatch(
            f"{conv.name} with other operations around it; the convolution family covers one "
            "convolution module applied to an input"
        )
    x = conv.args[0]
    tensor = isinstance(x, CNode) and isinstance(x.value, torch.Tensor)
    if not tensor or x.op != "input" or x.value.dtype != torch.float32:
        raise NoMatch(f"convolution ({conv.name}) of other than a float32 forward input")
    nd, transposed = conv.attrs["nd"], conv.attrs["transposed"]
    if len(x.shape) not in (nd + 1, nd + 2):
        raise NoMatch(f"convolution ({conv.name}) of a {len(x.shape)}-d tensor")
    ir = ConvIR(nd, transposed, conv.attrs["path"], x.attrs["name"])
    kind = "transposed convolution" if transposed else "convolution"
    return ir, f"{kind} {nd}d ({conv.attrs['path']}) of {list(x.shape)}"
