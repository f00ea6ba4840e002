"""Triton channel-norm kernels (see htam/offline/ir/channel_norm.py for the view): statistics
``k`` split over ``split`` programs, each reducing its segments to a (count, mean, M2) partial
(per-lane Welford, lanes merged once); then the same grid merges the partials of its ``k`` and
normalizes its segments, applying the per-channel weight and bias."""

from __future__ import annotations

from htam.offline.ir.channel_norm import geometry_lines, running_update_lines
from htam.offline.ir.model import ChannelNormIR
from htam.offline.params import ChannelNormParams

STATS = """
@triton.jit
def htam_cn_stats(x_ptr, cnt_ptr, mean_ptr, m2_ptr, A, L, T, KC, CPK, S, CS, split,
                  BLOCK: tl.constexpr):
    k = tl.program_id(0)
    j = tl.program_id(1)
    base0 = (k // KC).to(tl.int64) * CS + (k % KC).to(tl.int64) * CPK * S
    cols = tl.arange(0, BLOCK)
    wn = tl.zeros([BLOCK], tl.float32)
    wm = tl.zeros([BLOCK], tl.float32)
    wq = tl.zeros([BLOCK], tl.float32)
    # int64 offsets: segment a starts at base0 + a * T (split is a plain int when interpreted)
    base = base0 + j.to(tl.int64) * T
    step = (j * 0 + split).to(tl.int64) * T
    for a in range(j, A, split):
        for start in range(0, L, BLOCK):
            c = start + cols
            msk = c < L
            x = tl.load(x_ptr + base + c, mask=msk, other=0.0)
            wn = wn + tl.where(msk, 1.0, 0.0)
            d = x - wm
            wm = wm + tl.where(msk, d / tl.maximum(wn, 1.0), 0.0)
            wq = wq + tl.where(msk, d * (x - wm), 0.0)
        base += step
    wt = tl.sum(wn, 0)
    mu = tl.sum(wn * wm, 0) / tl.maximum(wt, 1.0)
    q = tl.sum(wq, 0) + tl.sum(wn * (wm - mu) * (wm - mu), 0)
    idx = k * split + j
    tl.store(cnt_ptr + idx, wt)
    tl.store(mean_ptr + idx, mu)
    tl.store(m2_ptr + idx, q)
"""

APPLY = """
@triton.jit
def htam_cn_apply(x_ptr, out_ptr, w_ptr, b_ptr, cnt_ptr, mean_ptr, m2_ptr, smean_ptr, svar_ptr,
                  A, L, T, KC, CPK, S, CS, split, eps, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                  SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    k = tl.program_id(0)
    j = tl.program_id(1)
    p = tl.arange(0, SPLIT)
    pm = p < split
    pn = tl.load(cnt_ptr + k * split + p, mask=pm, other=0.0)
    pmu = tl.load(mean_ptr + k * split + p, mask=pm, other=0.0)
    pq = tl.load(m2_ptr + k * split + p, mask=pm, other=0.0)
    n = tl.sum(pn, 0)
    mean = tl.sum(pn * pmu, 0) / n
    var = (tl.sum(pq, 0) + tl.sum(pn * (pmu - mean) * (pmu - mean), 0)) / n
    rstd = 1.0 / tl.sqrt(var + eps)
    base0 = (k // KC).to(tl.int64) * CS + (k % KC).to(tl.int64) * CPK * S
    c0 = (k % KC) * CPK
    cols = tl.arange(0, BLOCK)
    # int64 offsets: segment a starts at base0 + a * T (split is a plain int when interpreted)
    base = base0 + j.to(tl.int64) * T
    step = (j * 0 + split).to(tl.int64) * T
    for a in range(j, A, split):
        for start in range(0, L, BLOCK):
            c = start + cols
            msk = c < L
            x = tl.load(x_ptr + base + c, mask=msk, other=0.0)
            y = (x - mean) * rstd
            ch = c0 + c // S
            if HAS_W:
                y = y * tl.load(w_ptr + ch, mask=msk, other=1.0)
            if HAS_B:
                y = y + tl.load(b_ptr + ch, mask=msk, other=0.0)
            tl.store(out_ptr + base + c, y, mask=msk)
        base += step
    if j == 0:
        tl.store(smean_ptr + k, mean)
        tl.store(svar_ptr + k, var)
"""


def channel_norm_solution(ir: ChannelNormIR, p: ChannelNormParams) -> tuple[list[str], list[str]]:
    """(kernels, forward lines) for the channel-norm family."""
    sizes = "A, L, T, KC, CPK, S, C * S, split"
    lines = geometry_lines(ir) + [
        f"block = min({p.block}, triton.next_power_of_2(L))",
        "if batch_stats:",
        f"    split = max(1, min(A, {p.programs} // K))",
        "    parts = torch.empty((3, K * split), dtype=torch.float32, device=x.device)",
        "    htam_cn_stats[(K, split)](x, parts[0], parts[1], parts[2], "
        f"{sizes}, BLOCK=block, num_warps={p.warps})",
        "else:  # eval mode: the running statistics, as one partial of count 1",
        "    split = 1",
        "    parts = torch.stack([torch.ones_like(m.running_mean), m.running_mean, m.running_var])",
        "stats = torch.empty((2, K), dtype=torch.float32, device=x.device)",
        "stat_mean, stat_var = stats[0], stats[1]",
        "w = getattr(m, 'weight', None)",
        "b = getattr(m, 'bias', None)",
        "htam_cn_apply[(K, split)](x, out, x if w is None else w, x if b is None else b, "
        f"parts[0], parts[1], parts[2], stat_mean, stat_var, {sizes}, float(m.eps), "
        "HAS_W=w is not None, HAS_B=b is not None, SPLIT=triton.next_power_of_2(split), "
        f"BLOCK=block, num_warps={p.warps})",
        *running_update_lines(ir),
        "return out",
    ]
    return [STATS.strip(), APPLY.strip()], lines
