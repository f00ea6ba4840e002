"""A library prefix's matrix product as the Triton backend's own GEMM.

KernelBench level 2 holds a matrix product followed by reductions or norms (``Gemm ->
GroupNorm``, ``Matmul -> LogSumExp``): the row template takes the tail, and torch would compute
the product in IEEE float32, as the reference does. The GEMM template plans each shape on the
device and runs TF32 where the evaluator's float32 tolerance allows it (``gemm_plan.py``; the
candidate's plan says so), so the prefix's product, when it reads forward inputs and parameters
only, is computed by it (bias fused) before the rest of the prelude.
"""

from __future__ import annotations

import ast

from htam.offline.backends.triton.gemm import gemm_solution
from htam.offline.ir.expr import Math
from htam.offline.ir.model import Match
from htam.offline.params import GemmParams

# the baseline GEMM: tile, K step and precision planned per shape, the bias in the kernel
PLANNED = GemmParams(epilogue="fused", tile=-1, bk=0, tf32=None)


def _assigned(lines: list[str]) -> set[str]:
    tree = ast.parse("\n".join(lines))
    return {
        n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
    }


def prefix_gemm(match: Match, m: Math) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """(kernels, forward lines before the prelude, prelude results they compute) for the
    prefix's one matrix product; nothing when there is none, or more than one (the kernels'
    names would clash), or when the lines would overwrite a forward input."""
    if len(match.prefix_gemms) != 1:
        return (), (), ()
    ((name, ir),) = match.prefix_gemms.items()
    kernels, lines = gemm_solution(ir, PLANNED, m)
    if lines[-1] != "return out":
        raise RuntimeError(f"the GEMM template's forward ends with {lines[-1]!r}")
    lines = [*lines[:-1], f"{name} = out"]
    if _assigned(lines) & set(match.inputs):
        return (), (), ()
    return tuple(kernels), tuple(lines), (name,)
