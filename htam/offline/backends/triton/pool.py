"""Triton pooling kernel: one output element per lane, ``BLOCK`` a program; the window's depth
and height are loops, its width unrolled (``KW`` a compile-time constant)."""

from __future__ import annotations

from htam.offline.backends.triton.window import split_output_index
from htam.offline.ir.model import PoolIR
from htam.offline.ir.pool import ADAPTIVE, GEOMETRY, adaptive_forward, pool_forward
from htam.offline.params import PoolParams

KERNEL = f"""
@triton.jit
def htam_pool(x_ptr, out_ptr, n, D, H, W, OD, OH, OW, KD, KH, SD, SH, SW, PD, PH, PW,
              DD, DH, DW, divisor, KW: tl.constexpr, MAX: tl.constexpr,
              COUNT_PAD: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
{split_output_index("offs", "nc")}
    d0 = od * SD - PD
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    base = nc * D * H * W
    if MAX:
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
    for kd in range(KD):
        i_d = d0 + kd * DD
        v_d = mask & (i_d >= 0) & (i_d < D)
        for kh in range(KH):
            i_h = h0 + kh * DH
            v_h = v_d & (i_h >= 0) & (i_h < H)
            row = base + (i_d * H + i_h) * W
            for kw in tl.static_range(KW):
                i_w = w0 + kw * DW
                ok = v_h & (i_w >= 0) & (i_w < W)
                if MAX:
                    v = tl.load(x_ptr + row + i_w, mask=ok, other=float("-inf"))
                    acc = tl.maximum(acc, v)
                else:
                    acc += tl.load(x_ptr + row + i_w, mask=ok, other=0.0)
    if MAX:
        res = acc
    else:
        if COUNT_PAD:  # the window clipped to the padded input
            cd = tl.minimum(d0 + KD, D + PD) - d0
            ch = tl.minimum(h0 + KH, H + PH) - h0
            cw = tl.minimum(w0 + KW, W + PW) - w0
        else:  # the window clipped to the input
            cd = tl.minimum(d0 + KD, D) - tl.maximum(d0, 0)
            ch = tl.minimum(h0 + KH, H) - tl.maximum(h0, 0)
            cw = tl.minimum(w0 + KW, W) - tl.maximum(w0, 0)
        count = (cd * ch * cw).to(tl.float32)
        den = tl.where(divisor > 0, divisor * 1.0, count)
        res = acc / den
    tl.store(out_ptr + offs, res, mask=mask)
"""


ADAPTIVE_KERNEL = f"""
@triton.jit
def htam_apool(x_ptr, out_ptr, n, D, H, W, OD, OH, OW, KD, KH, KW: tl.constexpr,
               MAX: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
{split_output_index("offs", "nc")}
    d0 = od * D // OD
    d1 = ((od + 1) * D + OD - 1) // OD
    h0 = oh * H // OH
    h1 = ((oh + 1) * H + OH - 1) // OH
    w0 = ow * W // OW
    w1 = ((ow + 1) * W + OW - 1) // OW
    base = nc * D * H * W
    if MAX:
        acc = tl.full([BLOCK], float("-inf"), tl.float32)
    else:
        acc = tl.zeros([BLOCK], tl.float32)
    for kd in range(KD):
        i_d = d0 + kd
        v_d = mask & (i_d < d1)
        for kh in range(KH):
            i_h = h0 + kh
            v_h = v_d & (i_h < h1)
            row = base + (i_d * H + i_h) * W
            for kw in tl.static_range(KW):
                i_w = w0 + kw
                ok = v_h & (i_w < w1)
                if MAX:
                    v = tl.load(x_ptr + row + i_w, mask=ok, other=float("-inf"))
                    acc = tl.maximum(acc, v)
                else:
                    acc += tl.load(x_ptr + row + i_w, mask=ok, other=0.0)
    if MAX:
        res = acc
    else:
        res = acc / ((d1 - d0) * (h1 - h0) * (w1 - w0)).to(tl.float32)
    tl.store(out_ptr + offs, res, mask=mask)
"""


def pool_solution(ir: PoolIR, p: PoolParams) -> tuple[list[str], list[str]]:
    """(module-level code, forward lines) for the pool family."""
    if ir.adaptive:
        launch = (
            "htam_apool[(triton.cdiv(n, block),)](x, out, n, *size, *osz, k[0], k[1], "
            f"KW=k[2], MAX={ir.kind == 'max'}, BLOCK=block, num_warps={p.warps})"
        )
        lines = adaptive_forward(ir.source, ir.module, ir.nd)
        lines += [f"block = {p.block}", launch, "return out"]
        return [ADAPTIVE.strip(), ADAPTIVE_KERNEL.strip()], lines
    launch = (
        "htam_pool[(triton.cdiv(n, block),)](x, out, n, *size, *osz, k[0], k[1], *s, *p, *d, "
        f"divisor, KW=k[2], MAX={ir.kind == 'max'}, COUNT_PAD=count_pad, BLOCK=block, "
        f"num_warps={p.warps})"
    )
    lines = pool_forward(ir.source, ir.module, ir.nd, ir.kind)
    lines += [f"block = {p.block}", launch, "return out"]
    return [GEOMETRY.strip(), KERNEL.strip()], lines
