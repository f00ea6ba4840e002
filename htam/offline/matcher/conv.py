"""The convolution family: one convolution or transposed convolution module of a forward
input."""

from __future__ import annotations

import torch

from htam.offline.front.lower import CNode, bias_folds
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import ConvIR

CONV_OPS = ("conv",)


def match_conv(out: CNode, convs: list[CNode], model: torch.nn.Module) -> tuple[ConvIR, str]:
    """(ir, summary) when ``out`` is a chain of convolution modules (each convolving the one
    before, e.g. depthwise then pointwise) of a float32 forward input. One convolution whose
    bias folds stays a library prefix (cuDNN's convolution without the bias, a kernel adding
    it), the path measured before this family."""
    chain: list[CNode] = []
    node = out
    while isinstance(node, CNode) and node.op == "conv":
        chain.insert(0, node)
        node = node.args[0]
    if len(chain) != len(convs):
        raise NoMatch(
            f"{convs[0].name} with other operations around it; the convolution family covers "
            "a chain of convolution modules applied to an input"
        )
    first = chain[0]
    path = first.attrs["path"]
    if len(chain) == 1 and bias_folds(model.get_submodule(path), path):
        raise NoMatch(
            f"{first.name} has a bias that a library prefix adds in a kernel of its own after "
            "cuDNN's convolution"
        )
    x = node
    tensor = isinstance(x, CNode) and isinstance(x.value, torch.Tensor)
    if not tensor or x.op != "input" or x.value.dtype != torch.float32:
        raise NoMatch(f"convolution ({first.name}) of other than a float32 forward input")
    nd = first.attrs["nd"]
    if len(x.shape) not in (nd + 1, nd + 2):
        raise NoMatch(f"convolution ({first.name}) of a {len(x.shape)}-d tensor")
    stages = [(c.attrs["path"], c.attrs["nd"], c.attrs["transposed"]) for c in chain]
    kinds = " -> ".join(f"{'transposed ' if t else ''}conv{n}d ({p})" for p, n, t in stages)
    return ConvIR(stages, x.attrs["name"]), f"{kinds} of {list(x.shape)}"
