"""Triton strided copy of the permute family: one output element per lane, its index split
over the view's ``RANK`` padded sizes and dotted with the view's strides (any input strides)."""

from __future__ import annotations

from htam.offline.ir.permute import RANK, PermuteIR, permute_forward
from htam.offline.params import PoolParams

_SIZES = ", ".join(f"S{d}" for d in range(1, RANK))
_STRIDES = ", ".join(f"T{d}" for d in range(RANK))
_SPLIT = "\n".join(
    f"    i{d} = r % S{d}\n    r = r // S{d}\n    src += i{d} * T{d}"
    for d in range(RANK - 1, 0, -1)
)
KERNEL = f"""
@triton.jit
def htam_permute(x_ptr, out_ptr, n, {_SIZES}, {_STRIDES}, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    r = offs
    src = offs * 0
{_SPLIT}
    src += r * T0
    tl.store(out_ptr + offs, tl.load(x_ptr + src, mask=mask), mask=mask)
"""


def permute_solution(ir: PermuteIR, p: PoolParams) -> tuple[list[str], list[str]]:
    """(kernels, forward lines) for the permute family."""
    launch = (
        "htam_permute[(triton.cdiv(n, block),)](v, out, n, *sizes[1:], *strides, "
        f"BLOCK=block, num_warps={p.warps})"
    )
    return [KERNEL.strip()], [*permute_forward(ir), f"block = {p.block}", launch, "return out"]
