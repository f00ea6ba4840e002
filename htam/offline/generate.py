"""Code for a match and a parameter set: dispatch to the family's template in the language."""

from __future__ import annotations

from htam.offline.ir.expr import Math
from htam.offline.ir.model import Match
from htam.offline.source import render


def generate(match: Match, language: str, params: dict, applied: list[str]) -> str:
    """The complete solution file for ``match`` with ``params`` (see htam.offline.params)."""
    m = Math("triton" if language == "triton" else "cpp", exp2=params.get("exp2", False))
    if language == "triton":
        from htam.offline.backends.triton.ew import ew_solution
        from htam.offline.backends.triton.gemm import gemm_solution
        from htam.offline.backends.triton.row import row_solution

        emit = {"elementwise": ew_solution, "row": row_solution, "gemm": gemm_solution}
        kernels, forward = emit[match.family](match.ir, params, m)
        forward = [*match.prelude, *forward]  # the library prefix (torch) before the kernels
        return render(match, language, params, applied, kernels, forward)
    if language == "cpp":
        from htam.offline.backends.cpp.ew import ew_solution as cpp_ew
        from htam.offline.backends.cpp.gemm import gemm_solution as cpp_gemm
        from htam.offline.backends.cpp.row import row_solution as cpp_row

        emit = {"elementwise": cpp_ew, "row": cpp_row, "gemm": cpp_gemm}
        cpp, forward = emit[match.family](match.ir, params, m)
        forward = [*match.prelude, *forward]
        return render(match, language, params, applied, [], forward, cpp=cpp)
    raise ValueError(f"the offline templates write triton or cpp, not {language!r}")
