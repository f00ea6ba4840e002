"""The permute family: a forward input moved to another order (transposes, permutes, pixel
shuffles) with nothing computed, one strided copy (htam.offline.ir.permute)."""

from __future__ import annotations

import torch

from htam.offline.front.lower import CNode
from htam.offline.front.trace import NoMatch
from htam.offline.ir.permute import PermuteIR

PERMUTE_OPS = ("transpose", "permute", "pixel_shuffle", "pixel_unshuffle")
_MOVES = (*PERMUTE_OPS, "identity")


def is_permutation(out: CNode) -> bool:
    """Whether ``out`` is a forward input moved by the ops above alone (one of them at least)."""
    n, moved = out, False
    while n.op in _MOVES:
        if not n.args or not isinstance(n.args[0], CNode):
            return False
        moved = moved or n.op != "identity"
        n = n.args[0]
    return moved and n.op == "input"


def _dims(n: CNode) -> tuple[int, ...]:
    rank = len(n.args[0].shape)
    if n.op == "transpose":
        order = list(range(rank))
        a, b = n.attrs["dim0"] % rank, n.attrs["dim1"] % rank
        order[a], order[b] = order[b], order[a]
        return tuple(order)
    dims = n.attrs["dims"]
    dims = dims.value if hasattr(dims, "value") else dims
    return tuple(int(d) % rank for d in dims)


def match_permute(out: CNode) -> tuple[PermuteIR, str]:
    """(ir, summary) of a permutation of a float32 forward input (:func:`is_permutation`)."""
    chain = []
    n = out
    while n.op != "input":
        chain.append(n)
        n = n.args[0]
    if n.value.dtype != torch.float32:
        raise NoMatch(f"a permutation of {n.attrs['name']} ({n.value.dtype}): float32 only")
    steps: list[tuple[str, tuple[int, ...]]] = []
    for node in reversed(chain):
        if node.op in ("transpose", "permute"):
            steps.append(("permute", _dims(node)))
        elif node.op in ("pixel_shuffle", "pixel_unshuffle"):
            kind = "shuffle" if node.op == "pixel_shuffle" else "unshuffle"
            factor = node.attrs.get("upscale_factor", node.attrs.get("downscale_factor"))
            if not isinstance(factor, int):
                raise NoMatch(f"{node.op} ({node.name}) with a factor known at run time only")
            steps.append((kind, (factor,)))
    ir = PermuteIR(n.attrs["name"], tuple(steps))
    what = " -> ".join(f"{k}{list(a)}" for k, a in steps)
    return ir, f"permutation {what} of {n.attrs['name']} {list(n.shape)} to {list(out.shape)}"
