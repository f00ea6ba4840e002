"""Match one matrix product (nn.Linear, matmul, mm, bmm, addmm, @) plus an elementwise epilogue."""

from __future__ import annotations

from typing import cast

import torch

from htam.offline.front.lower import CNode
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import ACC, Arg, GemmIR, GemmSide
from htam.offline.matcher.build import Builder, bind_device


def _leaf_source(n: CNode) -> str:
    return n.attrs["name"] if n.op == "input" else f"_attr(self, {n.attrs['path']!r})"


def _swaps_last_two(n: CNode) -> bool:
    rank = len(n.args[0].shape)
    if n.op == "transpose":
        dims = {n.attrs["dim0"] % rank, n.attrs["dim1"] % rank}
        return rank >= 2 and dims == {rank - 2, rank - 1}
    order = [d % rank for d in n.attrs["dims"]]
    return order == list(range(rank - 2)) + [rank - 1, rank - 2]


def _side(n: CNode, transposed: bool = False) -> GemmSide:
    """A stored tensor read directly or with its last two dims swapped (a free view)."""
    while n.op == "identity":
        n = n.args[0]
    if n.op in ("transpose", "permute") and _swaps_last_two(n):
        return _side(n.args[0], not transposed)
    if n.op not in ("input", "param"):
        raise NoMatch(
            f"a GEMM operand is computed by {n.op} ({n.name}); ops before the "
            "matrix product are not supported"
        )
    if n.value.dtype != torch.float32:
        raise NoMatch(f"GEMM operand {n.name} is {n.value.dtype}; only float32 is supported")
    if n.value.dim() < 2:
        raise NoMatch(f"GEMM operand {n.name} has {n.value.dim()} dim(s); matrices are needed")
    return GemmSide(_leaf_source(n), transposed, n.value.dim())


def _sides(g: CNode) -> tuple[GemmSide, GemmSide, CNode | None, float, float]:
    """(A, B, bias or None, alpha, beta) of out = alpha * A @ B + beta * bias."""
    if g.op == "linear":
        bias = g.attrs.get("bias")
        return _side(g.args[0]), _side(g.attrs["weight"], True), bias, 1.0, 1.0
    if g.op == "addmm":
        alpha, beta = float(g.attrs.get("alpha", 1)), float(g.attrs.get("beta", 1))
        return _side(g.attrs["mat1"]), _side(g.attrs["mat2"]), g.args[0], alpha, beta
    return _side(g.args[0]), _side(g.attrs["other"]), None, 1.0, 1.0


def _check_ranks(g: CNode, a: GemmSide, b: GemmSide) -> tuple[GemmSide, GemmSide, bool]:
    """(A, B, whether A's batch dims fold into M); batch dims that broadcast (``matmul``
    only) are expanded to the common batch in the forward; raises for other layouts."""
    if b.rank == 2:
        return a, b, not a.transposed
    a_shape = g.args[0].shape if g.op != "addmm" else g.attrs["mat1"].shape
    # a batched product names its B operand "other" (matmul, bmm) or "mat2"
    b_shape = cast(CNode, g.attrs.get("other") or g.attrs.get("mat2")).shape
    if a.rank == b.rank and a_shape[:-2] == b_shape[:-2]:
        return a, b, False
    if g.op != "matmul":
        raise NoMatch(
            f"batched product of shapes {list(a_shape)} and {list(b_shape)}: "
            "only equal batch dims (or a matrix right operand) are supported"
        )
    batch = tuple(torch.broadcast_shapes(a_shape[:-2], b_shape[:-2]))
    return _expand(a, b, a_shape, batch), _expand(b, a, b_shape, batch), False


def _expand(side: GemmSide, other: GemmSide, shape, batch: tuple[int, ...]) -> GemmSide:
    """``side`` read at the common batch of both operands (an expanded view the forward
    copies once, as torch.matmul does); unchanged where its batch is already that one."""
    if tuple(shape[:-2]) == batch:
        return side
    s, o = side.source, other.source
    source = f"{s}.expand(torch.broadcast_shapes({s}.shape[:-2], {o}.shape[:-2]) + {s}.shape[-2:])"
    return GemmSide(source, side.transposed, len(batch) + 2)


def match_gemm(g: CNode, out: CNode) -> GemmIR:
    a, b, bias, alpha, beta = _sides(g)
    a, b, fold = _check_ranks(g, a, b)
    if out.shape != g.shape:
        raise NoMatch(
            f"the output {list(out.shape)} is not shaped like the product "
            f"{list(g.shape)}; the epilogue must be elementwise"
        )
    builder = Builder(g.shape)
    head: Arg = ACC
    if alpha != 1.0:
        head = builder.op("mul", ACC, alpha)
    if bias is not None:  # the bias add (and addmm's scales) come first in the epilogue
        term = builder.arg(bias)
        head = builder.op("add", head, builder.op("mul", term, beta) if beta != 1.0 else term)
    builder.stop = lambda n: head if n is g else None
    prog = builder.build(out)
    return GemmIR(
        a, b, fold, prog, bind_device(list(builder.operands.values()), a.source), len(g.shape)
    )
