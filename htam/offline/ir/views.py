"""The forward's views of the tensors, the same for every backend.

Rows: the reduced tensor seen as ``(outer, R, inner)`` (the reduced dims ``d0..d1`` in the
middle), and the output allocated in the shape the reference returns. GEMM: each operand as a
batch of matrices with its strides (a transposed view is read in place, never copied), the
output's shape, and the epilogue as its own elementwise program when it does not run inside
the GEMM kernel (it then reads the product from the ``GEMM_OUT`` buffer).
"""

from __future__ import annotations

from dataclasses import replace

from htam.offline.ir.model import ACC, GemmIR, Op, Operand, Program, RowIR

GEMM_OUT = "gemm_out"  # the product, as an operand of a separate epilogue


def row_sizes(ir: RowIR, moved: bool = False) -> list[str]:
    """Forward lines: the (outer, R, inner) view of the primary input and the output.

    ``moved``: the primary was read with its channel dim moved last (``channels_last_rows``)
    and ``ir`` reduces that last dim; the per-row output keeps the reference's shape, whose
    flat order (batch, then positions) is the moved rows' order."""
    if moved:
        ir = channels_last_rows(ir)
    d0, d1 = ir.d0, ir.d1
    lines = [
        f"shape = tuple(t_{ir.primary}.shape)",
        f"outer = math.prod(shape[:{d0}])",
        f"R = math.prod(shape[{d0}:{d1 + 1}])",
        f"inner = math.prod(shape[{d1 + 1}:])",
        "n_rows = outer * inner",
    ]
    if moved:
        out_shape = "(shape[0], 1) + shape[1:-1]" if ir.keepdim else "shape[:-1]"
    elif ir.perm and ir.keepdim:  # the reference's shape: ones at the reduced dims
        kept = [
            f"shape[{ir.perm.index(d)}]" if ir.perm.index(d) < d0 else "1" for d in range(ir.rank)
        ]
        out_shape = f"({', '.join(kept)},)"
    elif ir.out_kind == "elem":
        out_shape = "shape"
    elif ir.keepdim:
        out_shape = f"shape[:{d0}] + (1,) * {d1 - d0 + 1} + shape[{d1 + 1}:]"
    else:
        out_shape = f"shape[:{d0}] + shape[{d1 + 1}:]"
    dtype = "torch.int64" if ir.out_dtype == "int64" else "torch.float32"
    return lines + [f"out = torch.empty({out_shape}, dtype={dtype}, device=t_{ir.primary}.device)"]


def per_channel(op: Operand, rank: int) -> bool:
    """An operand laid along dim 1 alone of a rank-``rank`` output (a convolution's bias)."""
    return op.pattern in ("mid", "trail") and op.head == 1 and op.tail == rank - 2


def channels_last_rows(ir: RowIR) -> RowIR:
    """A reduction over the channel dim (1) of a channels-last tensor, seen as the reduction
    over the last dim of its ``movedim(1, -1)`` view (contiguous: rows of channels); a
    per-channel operand is then laid along that last dim."""
    last = ir.rank - 1
    operands = [
        replace(op, pattern="trail", tail=0, head=last) if per_channel(op, ir.rank) else op
        for op in ir.operands
    ]
    return replace(ir, d0=last, d1=last, operands=operands)


def side_lines(name: str, source: str, transposed: bool, fold: bool) -> list[str]:
    """Forward lines giving the logical matrix dims and strides of one operand."""
    t = f"t_{name}"
    view = (
        f"{t}.reshape(1, -1, {t}.shape[-1])"
        if fold
        else f"{t}.reshape(-1, {t}.shape[-2], {t}.shape[-1])"
    )
    r, c = (2, 1) if transposed else (1, 2)
    return [
        f"{t} = {source}.contiguous()",
        f"{name}3 = {view}",
        f"{name}_rows, {name}_cols = {name}3.shape[{r}], {name}3.shape[{c}]",
        f"{name}_sb = {name}3.stride(0) if {name}3.shape[0] > 1 else 0",
        f"{name}_sr, {name}_sc = {name}3.stride({r}), {name}3.stride({c})",
    ]


def gemm_prelude(ir: GemmIR) -> list[str]:
    """Forward lines: both operands' views (``ga3``, ``gb3``), M, K, N, batch and ``out``."""
    lines = side_lines("ga", ir.a.source, ir.a.transposed, ir.fold_batch)
    lines += side_lines("gb", ir.b.source, ir.b.transposed, False)
    lines += ["M, K, N = ga_rows, ga_cols, gb_cols", "batch = max(ga3.shape[0], gb3.shape[0])"]
    if ir.fold_batch:
        shape = "(*t_ga.shape[:-1], N)"
    else:
        big = "t_ga" if ir.a.rank >= ir.b.rank else "t_gb"
        shape = f"(*{big}.shape[:-2], M, N)"
    return lines + [
        f"out_shape = {shape}",
        "out = torch.empty(out_shape, dtype=torch.float32, device=t_ga.device)",
    ]


def separate_epilogue(ir: GemmIR) -> tuple[Program, list[Operand]]:
    """The epilogue as an elementwise program reading the product from a buffer."""
    ops = [
        Op(op.name, tuple(GEMM_OUT if a == ACC else a for a in op.args), op.attrs, op.kind)
        for op in ir.epilogue.ops
    ]
    return Program(ops, ir.epilogue.out), [Operand(GEMM_OUT, GEMM_OUT, "full"), *ir.operands]
