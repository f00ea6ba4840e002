"""Reductions over non-adjacent dims (``x.amax(dim=(0, 2))``): the graph rewritten over the
input permuted so that the reduced dims come last (kept dims first, in order), where they are
one block; the forward reads the input through ``.permute(...)`` (one copy by torch, then our
row kernel). The per-row output's flat order is the kept dims' order either way, so it is
written in the reference's shape. Covered: per-row outputs of row operations reducing the same
dims of full-shaped inputs or parameters, with elementwise steps and scalars around them."""

from __future__ import annotations

from dataclasses import replace

import torch

from htam.offline.front.lower import CNode
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import RowIR
from htam.offline.matcher.build import ROW_OPS
from htam.offline.matcher.rows import reduced_dims


def _meta(shape: tuple[int, ...], like) -> torch.Tensor:
    dtype = like.dtype if isinstance(like, torch.Tensor) else torch.float32
    return torch.empty(shape, dtype=dtype, device="meta")


class _Permuted:
    def __init__(self, full: tuple[int, ...], dims: tuple[int, ...]):
        self.full, self.dims = full, dims
        kept = tuple(d for d in range(len(full)) if d not in dims)
        self.perm = kept + dims
        self.moved = tuple(full[d] for d in self.perm)
        self.keep = tuple(1 if d in dims else n for d, n in enumerate(full))
        self.squeezed = tuple(full[d] for d in kept)
        self.memo: dict[int, CNode] = {}

    def node(self, n: CNode) -> CNode:
        if id(n) not in self.memo:
            self.memo[id(n)] = self._node(n)
        return self.memo[id(n)]

    def _arg(self, a):
        return self.node(a) if isinstance(a, CNode) else a

    def _node(self, n: CNode) -> CNode:
        shape = tuple(n.shape) if isinstance(n.value, torch.Tensor) else None
        if n.op in ("input", "param"):
            if shape is None or n.value.numel() == 1:
                return n  # a scalar
            if shape != self.full:
                raise NoMatch(f"{n.name} of shape {list(shape)} beside a permuted reduction")
            return CNode(n.op, [], dict(n.attrs), _meta(self.moved, n.value), n.name)
        if n.op in ROW_OPS:
            x = n.args[0]
            if not isinstance(x, CNode) or x.shape != self.full or reduced_dims(n) != self.dims:
                raise NoMatch(f"{n.op} ({n.name}) reduces other dims than the first reduction")
            attrs = dict(n.attrs, dim=tuple(range(len(self.squeezed), len(self.full))))
            attrs["keepdim"] = False
            return CNode(n.op, [self.node(x)], attrs, _meta(self.squeezed, n.value), n.name)
        if shape == self.full:
            new = self.moved
        elif shape in (self.keep, self.squeezed):
            new = self.squeezed
        else:
            raise NoMatch(f"{n.op} ({n.name}) of shape {list(shape or ())} beside a permuted row")
        args = [self._arg(a) for a in n.args]
        attrs = {k: self._arg(v) for k, v in n.attrs.items()}
        return CNode(n.op, args, attrs, _meta(new, n.value), n.name)


def permuted_rows(out: CNode, first: CNode) -> tuple[CNode, CNode, tuple[int, ...], bool]:
    """(output, first reduction, permutation, keepdim) of the graph over the permuted input;
    NoMatch where the rewrite does not cover it (an output of the input's shape, say)."""
    x = first.args[0]
    dims = reduced_dims(first)
    p = _Permuted(tuple(x.shape), dims)
    if tuple(out.shape) not in (p.keep, p.squeezed) or p.keep == p.squeezed:
        raise NoMatch(
            f"{first.op} ({first.name}) reduces non-adjacent dims {list(dims)}; covered: one "
            "value per row (softmax-like outputs of the input's shape are not)"
        )
    return p.node(out), p.node(first), p.perm, tuple(out.shape) == p.keep


def permute_operands(ir: RowIR, perm: tuple[int, ...]) -> RowIR:
    """The IR reading every full-shaped operand through ``.permute(perm)``."""
    operands = [
        replace(op, source=f"{op.source}.permute{perm}") if op.pattern == "full" else op
        for op in ir.operands
    ]
    return replace(ir, operands=operands, perm=perm)
