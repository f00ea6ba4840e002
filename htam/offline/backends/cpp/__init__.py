"""The C++ backend: OpenMP loops built with torch.utils.cpp_extension, for the CPU."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from htam.offline.backends.base import KernelCode
from htam.offline.backends.cpp.channel_norm import channel_norm_solution
from htam.offline.backends.cpp.conv import conv_helper_cpp, conv_solution
from htam.offline.backends.cpp.ew import ew_solution
from htam.offline.backends.cpp.gemm import gemm_solution
from htam.offline.backends.cpp.loader import IMPORTS, cpp_loader
from htam.offline.backends.cpp.permute import permute_solution
from htam.offline.backends.cpp.pool import pool_solution
from htam.offline.backends.cpp.row import row_solution
from htam.offline.backends.cpp.scan import scan_solution
from htam.offline.backends.cpp.special import (
    attention_solution,
    loss_solution,
    triangular_solution,
)
from htam.offline.ir.conv import GEOMETRY as CONV_GEOMETRY
from htam.offline.ir.expr import Math
from htam.offline.ir.model import Match
from htam.offline.ir.pool import ADAPTIVE, GEOMETRY
from htam.offline.params import Params
from htam.offline.strategies import family_strategies
from htam.vocab import Language

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
# module-level Python helpers a family's forward calls
_HELPERS: dict[str, Callable[[Any], tuple[str, ...]]] = {
    "pool": lambda p: (GEOMETRY.strip(), ADAPTIVE.strip()),
    "conv": lambda p: (CONV_GEOMETRY.strip(), conv_helper_cpp(p)),
}
NOT_ON_CPU = ("precision.tensor_core_dot",)  # TF32 tensor cores: a GPU unit


class CppBackend:
    language = Language.CPP

    def strategies(self, match: Match) -> list[str]:
        return [s for s in family_strategies(match) if s not in NOT_ON_CPU]

    def render(self, match: Match, params: Params) -> KernelCode:
        m = Math("cpp", exp2=params.exp2)
        (fn, src), forward = _FAMILIES[match.family](match.ir, params, m)
        helpers = _HELPERS[match.family](params) if match.family in _HELPERS else ()
        setup = cpp_loader(fn, src, match.family)
        return KernelCode(IMPORTS, helpers, tuple(forward), setup=setup)
