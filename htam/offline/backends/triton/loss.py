"""Triton losses: one program a row of the inputs' last dim, looping over it in BLOCK chunks
(cross-entropy: an online log-sum-exp and the target's logit; KL divergence: the pointwise
terms' sum; triplet margin: the two pairwise distances), each row's value stored; then one
program sums the rows and divides by the reduction's count."""

from __future__ import annotations

from htam.offline.ir.special import KINDS, LossIR, loss_forward
from htam.offline.params import LossParams

ROW_KERNEL = """
@triton.jit
def htam_loss_rows(a_ptr, b_ptr, c_ptr, out_ptr, L, R, ignore_index, margin, eps,
                   KIND: tl.constexpr, LOG_INPUT: tl.constexpr, LOG_TARGET: tl.constexpr,
                   BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    base = row * L
    cols = tl.arange(0, BLOCK)
    if KIND == 0:  # cross-entropy: log-sum-exp of the logits minus the target's logit
        m = tl.max(tl.full([BLOCK], float("-inf"), tl.float32), 0)
        s = tl.sum(tl.zeros([BLOCK], tl.float32), 0)
        for c0 in range(0, L, BLOCK):
            x = tl.load(a_ptr + base + c0 + cols, mask=c0 + cols < L, other=float("-inf"))
            m_new = tl.maximum(m, tl.max(x, 0))
            s = s * tl.exp(m - m_new) + tl.sum(tl.exp(x - m_new), 0)
            m = m_new
        t = tl.load(b_ptr + row)
        valid = t != ignore_index
        picked = tl.load(a_ptr + base + tl.where(valid, t, 0))
        val = tl.where(valid, m + tl.log(s) - picked, 0.0)
        tl.store(out_ptr + R + row, tl.where(valid, 1.0, 0.0))
    elif KIND == 1:  # KL divergence: target * (log target - input), summed over the row
        acc = tl.zeros([BLOCK], tl.float32)
        for c0 in range(0, L, BLOCK):
            mask = c0 + cols < L
            x = tl.load(a_ptr + base + c0 + cols, mask=mask, other=1.0)
            t = tl.load(b_ptr + base + c0 + cols, mask=mask, other=0.0)
            if LOG_INPUT:
                x = tl.log(x)
            if LOG_TARGET:
                term = tl.exp(t) * (t - x)
            else:
                term = tl.where(t > 0, t * tl.log(tl.where(t > 0, t, 1.0)), 0.0) - t * x
            acc += tl.where(mask, term, 0.0)
        val = tl.sum(acc, 0)
    else:  # triplet margin: max(|a - p + eps| - |a - n + eps| + margin, 0)
        dp = tl.zeros([BLOCK], tl.float32)
        dn = tl.zeros([BLOCK], tl.float32)
        for c0 in range(0, L, BLOCK):
            mask = c0 + cols < L
            a = tl.load(a_ptr + base + c0 + cols, mask=mask, other=0.0)
            p = tl.load(b_ptr + base + c0 + cols, mask=mask, other=0.0)
            n = tl.load(c_ptr + base + c0 + cols, mask=mask, other=0.0)
            ep = tl.where(mask, a - p + eps, 0.0)
            en = tl.where(mask, a - n + eps, 0.0)
            dp += ep * ep
            dn += en * en
        val = tl.maximum(tl.sqrt(tl.sum(dp, 0)) - tl.sqrt(tl.sum(dn, 0)) + margin, 0.0)
    tl.store(out_ptr + row, val)
"""

SUM_KERNEL = """
@triton.jit
def htam_loss_sum(rows_ptr, out_ptr, R, den, COUNTED: tl.constexpr, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    cnt = tl.zeros([BLOCK], tl.float32)
    for r0 in range(0, R, BLOCK):
        mask = r0 + cols < R
        acc += tl.load(rows_ptr + r0 + cols, mask=mask, other=0.0)
        if COUNTED:
            cnt += tl.load(rows_ptr + R + r0 + cols, mask=mask, other=0.0)
    if COUNTED:
        den = tl.sum(cnt, 0)
    tl.store(out_ptr, tl.sum(acc, 0) / den)
"""


def loss_solution(ir: LossIR, p: LossParams) -> tuple[list[str], list[str]]:
    """(module-level code, forward lines) for the loss family."""
    counted = ir.kind == "cross_entropy" and ir.reduction == "mean"
    lines = loss_forward(ir)
    lines += [
        f"block = min({p.block}, triton.next_power_of_2(L))",
        f"htam_loss_rows[(R,)](a, b, c, rows, L, R, {ir.ignore_index}, {ir.margin}, {ir.eps!r}, "
        f"KIND={KINDS[ir.kind]}, LOG_INPUT={ir.log_input}, LOG_TARGET={ir.log_target}, "
        f"BLOCK=block, num_warps={p.warps})",
    ]
    if ir.reduction == "none":
        lines.append("return rows[:R].reshape(x0.shape[:-1])")
    else:
        lines += [
            "out = torch.empty((), dtype=torch.float32, device=x0.device)",
            f"htam_loss_sum[(1,)](rows, out, R, den, COUNTED={counted}, BLOCK=1024)",
            "return out",
        ]
    return [ROW_KERNEL.strip(), SUM_KERNEL.strip()], lines
