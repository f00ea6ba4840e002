"""C++/OpenMP scan: rows in parallel, each scanned in order with one running value."""

from __future__ import annotations

from htam.offline.backends.cpp.common import (
    HEADER,
    CppProgram,
    cpp_names,
    operand_args,
    operand_params,
    pointers,
)
from htam.offline.ir.expr import Math
from htam.offline.ir.model import ScanIR
from htam.offline.params import ScanParams


def _row_body(cp: CppProgram, ir: ScanIR) -> list[str]:
    ops = list(range(len(cp.prog.ops)))
    step = "acc *= v;" if ir.combine == "prod" else "acc += v;"
    store = ["out_p[f] = acc;", step] if ir.exclusive else [step, "out_p[f] = acc;"]
    return [
        f"const int64_t r = {'R - 1 - j' if ir.reverse else 'j'};",
        "const int64_t f = base + r * inner;",
        *cp.loads(cp.used_operands(ops, [cp.prog.out])),
        *[cp.stmt(i) for i in ops],
        f"const float v = {cp.ref(cp.prog.out)};",
        *store,
    ]


def scan_solution(ir: ScanIR, p: ScanParams, m: Math) -> tuple[tuple[str, str], list[str]]:
    tensors, sizes = operand_params(ir.operands)
    params = ", ".join(
        [
            "float* __restrict__ out_p",
            *tensors,
            "int64_t n_rows",
            "int64_t R",
            "int64_t inner",
            *sizes,
        ]
    )
    one = "1.0f" if ir.combine == "prod" else "0.0f"
    body = [
        *pointers(ir.operands),
        "#pragma omp parallel for schedule(static) if(n_rows * R >= PARALLEL_MIN)",
        "for (int64_t row = 0; row < n_rows; ++row) {",
        "  const int64_t base = (row / inner) * R * inner + row % inner;",
        f"  float acc = {one};",
        "  for (int64_t j = 0; j < R; ++j) {",
        *("    " + s for s in _row_body(CppProgram(ir.prog, ir.operands, m), ir)),
        "  }",
        "}",
    ]
    src = HEADER + f"\nvoid HTAM_FN({params}) {{\n" + "\n".join("  " + s for s in body) + "\n}\n"
    fn, src = cpp_names("scan", src)
    t_args, s_args = operand_args(ir.operands, "out")
    prim = f"t_{ir.primary}"
    lines = [f"t_{op.name} = {op.source}.contiguous()" for op in ir.operands]
    lines += [
        f"shape = tuple({prim}.shape)",
        f"out = torch.empty(shape, dtype=torch.float32, device={prim}.device)",
        "if out.numel() == 0:",
        "    return out",
        f"R = shape[{ir.dim}]",
        f"inner = math.prod(shape[{ir.dim + 1}:])",
        "n_rows = out.numel() // R",
        f"_ext.{fn}({', '.join(['out.data_ptr()', *t_args, 'n_rows', 'R', 'inner', *s_args])})",
        "return out",
    ]
    return (fn, src), lines
