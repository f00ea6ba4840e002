"""Triton kernels of the attention and triangular-product families.

Attention is flash-style: each program holds BLOCK_M queries and a BLOCK_DV slice of the head
dim of the output, and streams the keys in BLOCK_N steps with an online softmax (running max
and sum), Q K^T summed over the head dim in BLOCK_D steps; a head dim above the slice runs more
programs per query block (each recomputing Q K^T), never a tile that outgrows the registers.

The triangular product is a tiled GEMM whose programs over a tile wholly outside the kept
triangle store zeros without reading A or B: about half the product's work is skipped."""

from __future__ import annotations

from htam.offline.backends.triton.gemm_plan import tf32_max_k
from htam.offline.ir.special import AttentionIR, TriangularIR
from htam.offline.params import AttentionParams, TriangularParams

ATTENTION_KERNEL = """
@triton.jit
def htam_attention(q_ptr, k_ptr, v_ptr, out_ptr, S, D, scale, CAUSAL: tl.constexpr,
                   TF32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_D: tl.constexpr, BLOCK_DV: tl.constexpr):
    bh = tl.program_id(2).to(tl.int64)
    rm = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    rv = tl.program_id(1) * BLOCK_DV + tl.arange(0, BLOCK_DV)
    rd = tl.arange(0, BLOCK_D)
    base = bh * S * D
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, BLOCK_DV], tl.float32)
    hi = S
    if CAUSAL:  # keys after the block's last query are masked for every query of it
        hi = tl.minimum(S, (tl.program_id(0) + 1) * BLOCK_M)
    for n0 in range(0, hi, BLOCK_N):
        rn = n0 + tl.arange(0, BLOCK_N)
        s = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for d0 in range(0, D, BLOCK_D):
            dm = d0 + rd < D
            q = tl.load(q_ptr + base + rm[:, None] * D + d0 + rd[None, :],
                        mask=(rm[:, None] < S) & dm[None, :], other=0.0)
            k = tl.load(k_ptr + base + rn[None, :] * D + d0 + rd[:, None],
                        mask=(rn[None, :] < S) & dm[:, None], other=0.0)
            if TF32:
                s = tl.dot(q, k, s, input_precision="tf32")
            else:
                s = tl.dot(q, k, s, input_precision="ieee")
        s = s * scale
        keep = rn[None, :] < S
        if CAUSAL:
            keep = keep & (rn[None, :] <= rm[:, None])
        s = tl.where(keep, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        alpha = tl.exp(m_i - m_new)
        p = tl.exp(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = tl.load(v_ptr + base + rn[:, None] * D + rv[None, :],
                    mask=(rn[:, None] < S) & (rv[None, :] < D), other=0.0)
        acc = acc * alpha[:, None]
        if TF32:
            acc = tl.dot(p, v, acc, input_precision="tf32")
        else:
            acc = tl.dot(p, v, acc, input_precision="ieee")
        m_i = m_new
    acc = acc / l_i[:, None]
    tl.store(out_ptr + base + rm[:, None] * D + rv[None, :], acc,
             mask=(rm[:, None] < S) & (rv[None, :] < D))
"""

TRIANGULAR_KERNEL = """
@triton.jit
def htam_triangular(a_ptr, b_ptr, out_ptr, M, N, K, diag, UPPER: tl.constexpr,
                    TF32: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    BLOCK_K: tl.constexpr):
    pm = tl.program_id(0)
    pn = tl.program_id(1)
    rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
    # kept: j - i >= diag (triu) or j - i <= diag (tril); a tile without one stores zeros
    if UPPER:
        live = (pn * BLOCK_N + BLOCK_N - 1) - pm * BLOCK_M >= diag
    else:
        live = pn * BLOCK_N - (pm * BLOCK_M + BLOCK_M - 1) <= diag
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    if live:
        rk = tl.arange(0, BLOCK_K)
        for k0 in range(0, K, BLOCK_K):
            a = tl.load(a_ptr + rm[:, None].to(tl.int64) * K + k0 + rk[None, :],
                        mask=(rm[:, None] < M) & (k0 + rk[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k0 + rk[:, None]).to(tl.int64) * N + rn[None, :],
                        mask=(k0 + rk[:, None] < K) & (rn[None, :] < N), other=0.0)
            if TF32:
                acc = tl.dot(a, b, acc, input_precision="tf32")
            else:
                acc = tl.dot(a, b, acc, input_precision="ieee")
    off = rn[None, :] - rm[:, None]
    keep = (off >= diag) if UPPER else (off <= diag)
    tl.store(out_ptr + rm[:, None].to(tl.int64) * N + rn[None, :], tl.where(keep, acc, 0.0),
             mask=(rm[:, None] < M) & (rn[None, :] < N))
"""


def _tf32(flag: bool | None, k: str) -> str:
    """``tf32`` for the launch: forced, or (None) TF32 while the reduction length ``k`` is within
    the evaluator's float32 tolerance (gemm_plan.tf32_max_k)."""
    return str(flag) if flag is not None else f"{k} <= {tf32_max_k()}"


def attention_solution(ir: AttentionIR, p: AttentionParams) -> tuple[list[str], list[str]]:
    scale = "1.0 / math.sqrt(D)" if ir.scale is None else repr(ir.scale)
    lines = [
        f"q = {ir.q}.contiguous()",
        f"k = {ir.k}.contiguous()",
        f"v = {ir.v}.contiguous()",
        "S, D = q.shape[-2], q.shape[-1]",
        "BH = q.numel() // (S * D)",
        "out = torch.empty_like(q)",
        "if out.numel() == 0:",
        "    return out",
        f"bd = min({p.block_d}, max(16, triton.next_power_of_2(D)))",
        "bdv = min(128, max(16, triton.next_power_of_2(D)))  # output head dims per program",
        f"grid = (triton.cdiv(S, {p.block_m}), triton.cdiv(D, bdv), BH)",
        f"htam_attention[grid](q, k, v, out, S, D, {scale}, CAUSAL={ir.causal}, "
        f"TF32={_tf32(p.tf32, 'D')}, BLOCK_M={p.block_m}, BLOCK_N={p.block_n}, BLOCK_D=bd, "
        f"BLOCK_DV=bdv, num_warps={p.warps})",
        "return out",
    ]
    return [ATTENTION_KERNEL.strip()], lines


def triangular_solution(ir: TriangularIR, p: TriangularParams) -> tuple[list[str], list[str]]:
    lines = [
        f"a = {ir.a}.contiguous()",
        f"b = {ir.b}.contiguous()",
        "M, K = a.shape",
        "N = b.shape[1]",
        "out = torch.empty((M, N), dtype=torch.float32, device=a.device)",
        "if out.numel() == 0:",
        "    return out",
        f"grid = (triton.cdiv(M, {p.block_m}), triton.cdiv(N, {p.block_n}))",
        f"htam_triangular[grid](a, b, out, M, N, K, {ir.diagonal}, UPPER={ir.upper}, "
        f"TF32={_tf32(p.tf32, 'K')}, BLOCK_M={p.block_m}, BLOCK_N={p.block_n}, "
        f"BLOCK_K={p.block_k}, num_warps={p.warps})",
        "return out",
    ]
    return [TRIANGULAR_KERNEL.strip()], lines
