"""Which operations of a library prefix are heavy (a vendor library does them better than a
template) and how many of them are a network's layers (matcher/library.py)."""

from __future__ import annotations

import re
from typing import cast

import torch.fx as fx

from htam.offline.front.lower import CNode
from htam.offline.matcher.build import GEMM_OPS

# What counts as a library call: an operation a vendor library does better than a template
# (cuDNN, cuBLAS). A prefix must hold one; a mere zeros_like or sort does not make a task a
# "library call + epilogue".
_LIBRARY = re.compile(r"conv|pool|norm|linear|einsum|bmm|matmul|mm$|interpolate|upsample|attention",
                      re.IGNORECASE)  # fmt: skip


def heavy(n: CNode) -> bool:
    if n.op in GEMM_OPS:
        return True
    if n.op != "opaque":
        return False
    return bool(_LIBRARY.search(_name(n)))


def _name(n: CNode) -> str:
    """An opaque node's module class or function name."""
    node: fx.Node = n.attrs["fx"]
    if node.op == "call_module":
        owner = node.graph.owning_module
        path = cast(str, node.target)  # a module call's target is the module's path
        return type(owner.get_submodule(path)).__name__ if owner is not None else ""
    return node.target if isinstance(node.target, str) else node.target.__name__


_NORM_OR_POOL = re.compile(r"norm|pool", re.IGNORECASE)


def layers(prefix: list[CNode]) -> int:
    """How many of the prefix's operations are a network's layers (a convolution, a matrix
    product, an attention), norms and pools not counted."""
    return sum(
        heavy(n) and not (n.op == "opaque" and _NORM_OR_POOL.search(_name(n))) for n in prefix
    )


