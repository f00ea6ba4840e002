"""The channel-norm family: BatchNorm or GroupNorm of a forward input by a norm module."""

from __future__ import annotations

import torch

from htam.offline.front.lower import CNode
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import ChannelNormIR

NORM_OPS = ("batch_norm", "group_norm")


def match_channel_norm(out: CNode, norms: list[CNode]) -> tuple[ChannelNormIR, str]:
    """(ir, summary) when ``out`` is one norm module applied to a float32 forward input."""
    norm = norms[0]
    if len(norms) > 1 or out is not norm:
        raise NoMatch(
            f"{norm.op} ({norm.name}) with other operations around it; the channel-norm family "
            "covers one BatchNorm or GroupNorm module applied to an input"
        )
    x = norm.args[0]
    tensor = isinstance(x, CNode) and isinstance(x.value, torch.Tensor)
    if not tensor or x.op != "input" or x.value.dtype != torch.float32 or x.value.dim() < 2:
        raise NoMatch(f"{norm.op} ({norm.name}) of other than a float32 forward input (N, C, ...)")
    kind = norm.op.split("_")[0]
    ir = ChannelNormIR(kind, norm.attrs["path"], x.attrs["name"])
    return ir, f"{kind} norm ({norm.attrs['path']}) of {list(x.shape)}"
