"""C++/OpenMP elementwise loops: one fused loop, or one loop per op (the unfused baseline)."""

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
from htam.offline.ir.expr import Math
from htam.offline.ir.model import EwIR, Op, Operand, Program
from htam.offline.params import EwParams


def _body(cp: CppProgram, target: str) -> list[str]:
    ops = list(range(len(cp.prog.ops)))
    lines = cp.loads(cp.used_operands(ops, [cp.prog.out]))
    lines += [cp.stmt(i) for i in ops]
    return lines + [f"{target}[f] = {cp.ref(cp.prog.out)};"]


def _indent(lines: list[str], n: int = 1) -> list[str]:
    return ["  " * n + s for s in lines]


def ew_loop(prog: Program, operands: list[Operand], p: EwParams, m: Math, target: str) -> list[str]:
    """A parallel loop over the flat index ``f < n`` writing ``target[f]``."""
    body = _body(CppProgram(prog, operands, m), target)
    simd = [f"#pragma omp simd simdlen({p.vec})"] if p.vec > 1 else []
    if not p.split_tail:
        return [
            "{",
            f"  const int64_t CHUNK = {p.block};",
            "  const int64_t nchunks = (n + CHUNK - 1) / CHUNK;",
            "  #pragma omp parallel for schedule(static) if(n >= PARALLEL_MIN)",
            "  for (int64_t ch = 0; ch < nchunks; ++ch) {",
            "    const int64_t lo = ch * CHUNK, hi = std::min(n, lo + CHUNK);",
            *_indent(simd, 2),
            "    for (int64_t f = lo; f < hi; ++f) {",
            *_indent(body, 3),
            "    }",
            "  }",
            "}",
        ]
    # Full chunks have a compile-time trip count (vectorizable); the ragged tail runs apart.
    return [
        "{",
        f"  constexpr int64_t CHUNK = {p.block};",
        "  const int64_t nfull = n / CHUNK;",
        "  #pragma omp parallel for schedule(static) if(n >= PARALLEL_MIN)",
        "  for (int64_t ch = 0; ch < nfull; ++ch) {",
        *_indent(simd, 2),
        "    for (int64_t j = 0; j < CHUNK; ++j) {",
        "      const int64_t f = ch * CHUNK + j;",
        *_indent(body, 3),
        "    }",
        "  }",
        "  for (int64_t f = nfull * CHUNK; f < n; ++f) {",
        *_indent(body, 2),
        "  }",
        "}",
    ]


def ew_code(prog: Program, operands: list[Operand], p: EwParams, m: Math, target: str) -> list[str]:
    """Loops computing ``prog`` into ``target``: fused, or op by op through buffers."""
    if p.fuse or len(prog.ops) == 1:
        return ew_loop(prog, operands, p, m, target)
    by_name = {op.name: op for op in operands}
    lines: list[str] = []
    last = len(prog.ops) - 1
    for i, op in enumerate(prog.ops):
        args = tuple(f"tmp{a}" if isinstance(a, int) else a for a in op.args)
        used = [
            by_name[a] if a in by_name else Operand(a, a, "full")
            for a in dict.fromkeys(x for x in args if isinstance(x, str))
        ]
        dest = target if i == last else f"tmp{i}_p"
        if i != last:
            lines += scratch(f"tmp{i}", "n")
        single = Program([Op(op.name, args, op.attrs, op.kind)], 0)
        lines += ew_loop(single, used, p, m, dest)
    return lines


def ew_solution(ir: EwIR, p: EwParams, m: Math) -> tuple[tuple[str, str], list[str]]:
    tensors, sizes = operand_params(ir.operands)
    params = ", ".join(["float* __restrict__ out_p", *tensors, "int64_t n", *sizes])
    body = [
        *pointers(ir.operands),
        *ew_code(ir.prog, ir.operands, p, m, "out_p"),
    ]
    src = HEADER + f"\nvoid HTAM_FN({params}) {{\n" + "\n".join(_indent(body)) + "\n}\n"
    fn, src = cpp_names("ew", src)
    t_args, s_args = operand_args(ir.operands, "out")
    lines = [f"t_{op.name} = {op.source}.contiguous()" for op in ir.operands]
    prim = f"t_{ir.primary}"
    lines += [
        f"out = torch.empty({prim}.shape, dtype=torch.float32, device={prim}.device)",
        f"_ext.{fn}({', '.join(['out.data_ptr()', *t_args, 'out.numel()', *s_args])})",
        "return out",
    ]
    return (fn, src), lines
