"""C++/OpenMP GEMM: dot products over K, register blocking over rows of A, packed B panels.

``mr`` rows of A share each loaded column of B (rows per program); the tiling strategy packs a
panel of ``nc`` columns of B contiguously, so the K loop streams it from cache for every row.
"""

from __future__ import annotations

from htam.offline.backends.cpp.common import (
    HEADER,
    CppProgram,
    cpp_names,
    operand_args,
    operand_params,
    pointers,
    scratch,
)
from htam.offline.backends.cpp.ew import ew_code
from htam.offline.ir.expr import Math
from htam.offline.ir.model import GemmIR
from htam.offline.ir.views import GEMM_OUT, gemm_prelude, separate_epilogue
from htam.offline.params import TILES, EwParams, GemmParams


def _store(ir: GemmIR, m: Math, fused: bool, target: str) -> list[str]:
    """Write ``acc[r]`` for output row i0 + r, column j0 + jj (through the epilogue if fused)."""
    lines = ["const int64_t f = (bt * M + i0 + r) * N + j0 + jj;", "const float acc = acc_r[r];"]
    if not fused or not ir.has_epilogue:
        return lines + [f"{target}[f] = acc;"]
    cp = CppProgram(ir.epilogue, ir.operands, m, acc="acc")
    ops = list(range(len(ir.epilogue.ops)))
    lines += cp.loads(cp.used_operands(ops, [ir.epilogue.out]))
    lines += [cp.stmt(i) for i in ops]
    return lines + [f"{target}[f] = {cp.ref(ir.epilogue.out)};"]


def _dots(vec: int, bstep: str) -> list[str]:
    """``acc_r[r]``, the dot product of row r of A's block and the B column ``bcol``. Vectorized,
    each row is its own reduction over K: a reduction into the array section ``acc_r[:MR]``
    under ``omp simd`` made GCC give every run of the loop a stack copy that lived until the
    function returned, and a 1024x8192 output overflowed the stack (seen,
    tests/offline/test_cpp_gemm_stack.py). Otherwise the rows share each loaded value of B."""
    if vec > 1:
        return [
            "for (int64_t r = 0; r < mr; ++r) {",
            "  float acc = 0.0f;",
            "  #pragma omp simd reduction(+:acc)",
            "  for (int64_t k = 0; k < K; ++k)",
            f"    acc += arow[r * sam + k * sak] * bcol[k * {bstep}];",
            "  acc_r[r] = acc;",
            "}",
        ]
    return [
        "for (int64_t r = 0; r < MR; ++r) acc_r[r] = 0.0f;",
        "for (int64_t k = 0; k < K; ++k) {",
        f"  const float bv = bcol[k * {bstep}];",
        "  for (int64_t r = 0; r < mr; ++r) acc_r[r] += arow[r * sam + k * sak] * bv;",
        "}",
    ]


def _kernel(ir: GemmIR, p: GemmParams, m: Math, target: str) -> list[str]:
    fused = p.epilogue == "fused"
    tiled = p.tile > 0
    nc = TILES[p.tile][1] * 2 if tiled else 0
    lines = [f"constexpr int64_t MR = {p.mr};"]
    if tiled:
        lines.append("std::vector<float> panel((size_t)K * " + str(nc) + ");")
    lines += [
        "for (int64_t bt = 0; bt < batch; ++bt) {",
        f"  for (int64_t j0 = 0; j0 < N; j0 += {nc if tiled else 'N'}) {{",
        f"    const int64_t nc = std::min<int64_t>({nc if tiled else 'N'}, N - j0);",
    ]
    if tiled:  # pack B[:, j0:j0+nc] column by column: the K loop then reads it contiguously
        lines += [
            "    #pragma omp parallel for schedule(static) if(M * nc * K >= PARALLEL_MIN)",
            "    for (int64_t jj = 0; jj < nc; ++jj)",
            "      for (int64_t k = 0; k < K; ++k)",
            "        panel[jj * K + k] = B[bt * sbb + k * sbk + (j0 + jj) * sbn];",
        ]
    bcol = "panel.data() + jj * K" if tiled else "B + bt * sbb + (j0 + jj) * sbn"
    bstep = "1" if tiled else "sbk"
    store = _store(ir, m, fused, target)
    lines += [
        "    #pragma omp parallel for schedule(static) if(M * nc * K >= PARALLEL_MIN)",
        "    for (int64_t i0 = 0; i0 < M; i0 += MR) {",
        "      const int64_t mr = std::min<int64_t>(MR, M - i0);",
        "      const float* arow = A + bt * sab + i0 * sam;",
        "      for (int64_t jj = 0; jj < nc; ++jj) {",
        f"        const float* bcol = {bcol};",
        "        float acc_r[MR];",
        *("        " + s for s in _dots(p.vec, bstep)),
        "        for (int64_t r = 0; r < mr; ++r) {",
        *("          " + s for s in store),
        "        }",
        "      }",
        "    }",
        "  }",
        "}",
    ]
    return lines


def gemm_solution(ir: GemmIR, p: GemmParams, m: Math) -> tuple[tuple[str, str], list[str]]:
    fused = p.epilogue == "fused"
    separate = ir.has_epilogue and not fused
    operands = ir.operands if ir.has_epilogue else []
    tensors, sizes = operand_params(operands)
    params = ", ".join(
        [
            "float* __restrict__ out_p",
            "const float* __restrict__ A",
            "const float* __restrict__ B",
            *tensors,
            "int64_t batch",
            "int64_t M",
            "int64_t N",
            "int64_t K",
            "int64_t sab",
            "int64_t sam",
            "int64_t sak",
            "int64_t sbb",
            "int64_t sbk",
            "int64_t sbn",
            *sizes,
        ]
    )
    body = pointers(operands)
    if separate:
        body += ["const int64_t n = batch * M * N;", *scratch(GEMM_OUT, "n")]
    body += _kernel(ir, p, m, f"{GEMM_OUT}_p" if separate else "out_p")
    if separate:
        prog, ops = separate_epilogue(ir)
        ew = EwParams(fuse=p.epilogue == "kernel", block=1024, vec=p.vec, split_tail=p.split_tail)
        body += ew_code(prog, ops, ew, m, "out_p")
    src = HEADER + f"\nvoid HTAM_FN({params}) {{\n" + "\n".join("  " + s for s in body) + "\n}\n"
    fn, src = cpp_names("gemm", src)
    lines = [f"t_{op.name} = {op.source}.contiguous()" for op in operands]
    lines += gemm_prelude(ir)
    t_args, s_args = operand_args(operands, "out")
    call = ", ".join(
        [
            "out.data_ptr()",
            "ga3.data_ptr()",
            "gb3.data_ptr()",
            *t_args,
            "batch",
            "M",
            "N",
            "K",
            "ga_sb",
            "ga_sr",
            "ga_sc",
            "gb_sb",
            "gb_sr",
            "gb_sc",
            *s_args,
        ]
    )
    return (fn, src), lines + [f"_ext.{fn}({call})", "return out"]
