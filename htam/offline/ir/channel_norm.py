"""The channel-norm family's view of the tensor, the same for both backends.

The input ``(N, C, S...)`` is normalized by statistics ``k``: BatchNorm's ``k = c`` gathers
``A = N`` contiguous segments of ``L = S`` elements ``T = C * S`` apart; GroupNorm's
``k = (n, g)`` is one segment of ``L = C / G * S`` elements. Segment ``a`` of ``k`` starts at
``(k // KC) * C * S + (k % KC) * CPK * S + a * T`` and its element ``p`` is of channel
``(k % KC) * CPK + p // S``. The forward reads eps, the affine parameters, the mode and the
running statistics from the model's norm module at every call.
"""

from __future__ import annotations

from htam.offline.ir.model import ChannelNormIR


def geometry_lines(ir: ChannelNormIR) -> list[str]:
    """Forward lines: ``m``, ``x``, ``out`` and the sizes (returns early when empty)."""
    lines = [
        f"m = _attr(self, {ir.module!r})",
        f"x = {ir.source}.contiguous()",
        "out = torch.empty_like(x)",
        "if x.numel() == 0:",
        "    return out",
        "N, C = x.shape[0], x.shape[1]",
        "S = x.numel() // (N * C)",
    ]
    if ir.kind == "batch":
        return lines + [
            "K, KC, CPK, A, L, T = C, C, 1, N, S, C * S",
            "batch_stats = m.training or m.running_mean is None",
        ]
    return lines + [
        "G = m.num_groups",
        "K, KC, CPK, A = N * G, G, C // G, 1",
        "L, T = CPK * S, CPK * S",
        "batch_stats = True",
    ]


def running_update_lines(ir: ChannelNormIR) -> list[str]:
    """BatchNorm in training mode updates its running statistics as torch does (from this
    batch's mean and unbiased variance, ``stat_mean`` and ``stat_var`` per channel)."""
    if ir.kind != "batch":
        return []
    return [
        "if m.training and m.track_running_stats and m.running_mean is not None:",
        "    n = N * S",
        "    m.num_batches_tracked.add_(1)",
        "    f = m.momentum if m.momentum is not None else 1.0 / float(m.num_batches_tracked)",
        "    m.running_mean.mul_(1 - f).add_(stat_mean, alpha=f)",
        "    m.running_var.mul_(1 - f).add_(stat_var * (n / max(n - 1, 1)), alpha=f)",
    ]
