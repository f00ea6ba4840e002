"""Triton convolution, every kind through one index scheme over three spatial dims (1-d and 2-d
convolutions have leading sizes of one): an implicit GEMM, each program a BLOCK_M x BLOCK_N tile
of output positions x output channels of one group, the reduction over the group's input
channels x the window in BLOCK_K steps of masked loads into ``tl.dot``. A transposed convolution
is the same product in gather form: an output position reads the input positions whose stride
lands on it through a tap of the window. Groups with fewer than 16 output channels (depthwise)
run a direct kernel instead, one output element per lane, since ``tl.dot`` tiles need 16."""

from __future__ import annotations

from htam.offline.backends.triton.gemm_plan import tf32_max_k
from htam.offline.backends.triton.window import split_output_index
from htam.offline.ir.conv import GEOMETRY, conv_calls, conv_helper
from htam.offline.ir.model import ConvIR
from htam.offline.params import ConvParams

# input coordinate of an output position through a tap; ``ok`` where it lies in the input
_GATHER = """
    if TRANSPOSED:
        t{a} = o{a} + P{A} - k{a} * D{A}
        i{a} = t{a} // S{A}
        ok{a} = (t{a} >= 0) & (t{a} % S{A} == 0) & (i{a} < {A})
    else:
        i{a} = o{a} * S{A} - P{A} + k{a} * D{A}
        ok{a} = (i{a} >= 0) & (i{a} < {A})"""


def _gather(indent: str, shape: str = "") -> str:
    out = []
    for a in "dhw":
        text = _GATHER.format(a=a, A=a.upper())
        if shape:  # output index over rows, tap over columns
            text = text.replace(f"o{a} ", f"o{a}[:, None] ").replace(f"k{a} *", f"k{a}[None, :] *")
        out.append(text.replace("\n    ", "\n" + indent))
    return "".join(out)


_SIZES = "D, H, W, OD, OH, OW, KD, KH, KW, SD, SH, SW, PD, PH, PW, DD, DH, DW"

GEMM_KERNEL = f"""
@triton.jit
def htam_conv(x_ptr, w_ptr, b_ptr, out_ptr, M, C_IN, C_OUT, CIN_G, COUT_G, {_SIZES},
              TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr, TF32: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    g = tl.program_id(2)
    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    m_ok = rm < M
    n_ok = rn < COUT_G
{split_output_index("rm", "nb")}
    KK = KD * KH * KW
    K = CIN_G * KK
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k0 in range(0, K, BLOCK_K):
        rk = k0 + tl.arange(0, BLOCK_K)
        k_ok = rk < K
        ci = g * CIN_G + rk // KK
        r = rk % KK
        kd = r // (KH * KW)
        kh = (r // KW) % KH
        kw = r % KW{_gather("        ", "2d")}
        ok = okd & okh & okw & m_ok[:, None] & k_ok[None, :]
        x_off = ((nb[:, None] * C_IN + ci[None, :]) * D + id) * H * W + ih * W + iw
        a = tl.load(x_ptr + x_off, mask=ok, other=0.0)
        if TRANSPOSED:
            w_off = (ci[:, None] * COUT_G + rn[None, :]) * KK + r[:, None]
        else:
            w_off = (g * COUT_G + rn[None, :]) * K + rk[:, None]
        b = tl.load(w_ptr + w_off, mask=k_ok[:, None] & n_ok[None, :], other=0.0)
        if TF32:
            acc = tl.dot(a, b, acc, input_precision="tf32")
        else:
            acc = tl.dot(a, b, acc, input_precision="ieee")
    co = g * COUT_G + rn
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=n_ok, other=0.0)[None, :]
    pos = (od * OH + oh) * OW + ow
    o_off = (nb[:, None] * C_OUT + co[None, :]) * (OD * OH * OW) + pos[:, None]
    tl.store(out_ptr + o_off, acc, mask=m_ok[:, None] & n_ok[None, :])
"""

DIRECT_KERNEL = f"""
@triton.jit
def htam_conv_direct(x_ptr, w_ptr, b_ptr, out_ptr, n, C_IN, C_OUT, CIN_G, COUT_G, {_SIZES},
                     TRANSPOSED: tl.constexpr, HAS_BIAS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
{split_output_index("offs", "t")}
    co = t % C_OUT
    nb = t // C_OUT
    g = co // COUT_G
    KK = KD * KH * KW
    acc = tl.zeros([BLOCK], tl.float32)
    for c in range(CIN_G):
        ci = g * CIN_G + c
        for kd in range(KD):
            for kh in range(KH):
                for kw in range(KW):{_gather("                    ")}
                    ok = mask & okd & okh & okw
                    x_off = ((nb * C_IN + ci) * D + id) * H * W + ih * W + iw
                    r = (kd * KH + kh) * KW + kw
                    if TRANSPOSED:
                        w_off = (ci * COUT_G + co % COUT_G) * KK + r
                    else:
                        w_off = (co * CIN_G + c) * KK + r
                    xv = tl.load(x_ptr + x_off, mask=ok, other=0.0)
                    acc += xv * tl.load(w_ptr + w_off, mask=mask, other=0.0)
    if HAS_BIAS:
        acc += tl.load(b_ptr + co, mask=mask, other=0.0)
    tl.store(out_ptr + offs, acc, mask=mask)
"""


def _precision(p: ConvParams) -> str:
    """``tf32`` for the launch: forced either way, or (None, the baseline) TF32 while the
    reduction length is within what the evaluator's float32 tolerance allows."""
    return str(p.tf32) if p.tf32 is not None else f"cin_g * k[0] * k[1] * k[2] <= {tf32_max_k()}"


def conv_solution(ir: ConvIR, p: ConvParams) -> tuple[list[str], list[str]]:
    """(module-level code, forward lines) for the convolution family."""
    sizes = "*size, *osz, *k, *s, *p, *d"
    common = f"x, w, b_arg, out, {{n}}, c_in, c_out, cin_g, cout_g, {sizes}, transposed, "
    common += "bias is not None"
    block_n = str(p.block_n) if p.block_n else "min(64, max(16, triton.next_power_of_2(cout_g)))"
    launch = [
        f"if cout_g < 16:  # depthwise and other narrow groups: {p.block} outputs a program",
        f"    htam_conv_direct[(triton.cdiv(out.numel(), {p.block}),)]("
        + common.format(n="out.numel()")
        + f", BLOCK={p.block}, num_warps={p.warps})",
        "else:",
        f"    bm, bn, bk = {p.block_m}, {block_n}, {p.block_k}",
        "    grid = (triton.cdiv(n_pos, bm), triton.cdiv(cout_g, bn), groups)",
        "    htam_conv[grid](" + common.format(n="n_pos") + f", {_precision(p)}, BLOCK_M=bm, "
        f"BLOCK_N=bn, BLOCK_K=bk, num_warps={p.warps})",
    ]
    helper = conv_helper("_htam_conv", launch)
    kernels = [GEOMETRY.strip(), GEMM_KERNEL.strip(), DIRECT_KERNEL.strip(), helper]
    return kernels, conv_calls(ir, "_htam_conv")
