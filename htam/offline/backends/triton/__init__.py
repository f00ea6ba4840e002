"""The Triton backend: kernels run on the GPU, or under the Triton interpreter on the CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from htam.offline.backends.base import KernelCode
from htam.offline.backends.triton.channel_norm import channel_norm_solution
from htam.offline.backends.triton.conv import conv_solution
from htam.offline.backends.triton.ew import ew_solution
from htam.offline.backends.triton.gemm import gemm_solution
from htam.offline.backends.triton.layout import input_layout
from htam.offline.backends.triton.loss import loss_solution
from htam.offline.backends.triton.permute import permute_solution
from htam.offline.backends.triton.pool import pool_solution
from htam.offline.backends.triton.prefix import prefix_gemm
from htam.offline.backends.triton.row import row_solution
from htam.offline.backends.triton.scan import scan_solution
from htam.offline.backends.triton.special import attention_solution, triangular_solution
from htam.offline.ir.expr import Math
from htam.offline.ir.model import Match
from htam.offline.params import Params
from htam.offline.strategies import family_strategies
from htam.vocab import Language

IMPORTS = """import math

import torch
import torch.nn as nn
import triton
import triton.language as tl
"""
# each family's writer, called with that family's IR (Match.ir, tagged by Match.family)
_FAMILIES: dict[str, Callable[..., Any]] = {
    "elementwise": ew_solution,
    "row": row_solution,
    "gemm": gemm_solution,
    "scan": scan_solution,
    "pool": lambda ir, p, m: pool_solution(ir, p),  # no SSA program: nothing for Math
    "channel_norm": lambda ir, p, m: channel_norm_solution(ir, p),
    "conv": lambda ir, p, m: conv_solution(ir, p),
    "loss": lambda ir, p, m: loss_solution(ir, p),
    "attention": lambda ir, p, m: attention_solution(ir, p),
    "triangular": lambda ir, p, m: triangular_solution(ir, p),
    "permute": lambda ir, p, m: permute_solution(ir, p),
}


def built_in(match: Match) -> tuple[str, ...]:
    """Strategies the Triton baseline already holds: every row baseline's coalesced kernel (for
    a reduced dim that is not last), a channels-last convolution epilogue's fusion."""
    if match.family == "elementwise" and match.features.get("channels_last"):
        return ("memory_access.coalesced_row_access", "fusion.elementwise_chain_fusion")
    return ("memory_access.coalesced_row_access",)


class TritonBackend:
    language = Language.TRITON

    def strategies(self, match: Match) -> list[str]:
        return [s for s in family_strategies(match) if s not in built_in(match)]

    def render(self, match: Match, params: Params) -> KernelCode:
        m = Math("triton", exp2=params.exp2)
        kernels, forward = _FAMILIES[match.family](match.ir, params, m)
        gemm, pre, replaced = prefix_gemm(match, m)
        init: tuple[str, ...] = ()
        if getattr(params, "layout", False):
            convert, to_cl = input_layout(match)
            init, pre, gemm = ("_channels_last_weights(self)",), (*to_cl, *pre), (*convert, *gemm)
        return KernelCode(
            IMPORTS, (*gemm, *kernels), tuple(forward), init=init, pre=pre, replaced=replaced
        )
