"""C++/OpenMP row kernels: a parallel loop over tiles of rows, one column loop per pass.

A tile is one row, or (coalesced access) up to 16 adjacent rows of one outer index when the reduced
dim is not the last: the innermost loop then walks contiguous memory. With the row cache, element
values needed by several passes (``exp(x - max)`` in softmax, ``x - mean`` in layer norm) are
stored in a per-thread row buffer by the first pass and read back by the later ones.
"""

from __future__ import annotations

from htam.offline.backends.cpp import reduce as red
from htam.offline.backends.cpp.common import (
    HEADER,
    CppProgram,
    cpp_names,
    operand_args,
    operand_params,
    pointers,
)
from htam.offline.ir.expr import Math
from htam.offline.ir.model import RowIR
from htam.offline.ir.passes import elem_closure, schedule
from htam.offline.ir.views import row_sizes
from htam.offline.params import RowParams


class CppRow:
    def __init__(self, ir: RowIR, p: RowParams, m: Math):
        self.ir, self.p, self.m = ir, p, m
        self.cp = CppProgram(ir.prog, ir.operands, m)
        self.sched = schedule(ir.prog, p.online, p.welford)
        roots = [[r.arg for r in ps.reds] for ps in self.sched.passes]
        if ir.out_kind == "elem":
            roots.append([ir.prog.out])
        self.roots = roots
        counts: dict[int, int] = {}
        for rs in roots:
            for i in elem_closure(ir.prog, rs):
                counts[i] = counts.get(i, 0) + 1
        self.cached = {i for i, n in counts.items() if n > 1} if p.cache else set()

    def _closure(self, roots, available: set[int]) -> tuple[list[int], list[int]]:
        """(ops to compute, cached ops to read back) for one loop body."""
        compute, reuse, stack = set(), set(), [r for r in roots if isinstance(r, int)]
        while stack:
            i = stack.pop()
            if i in compute or i in reuse or self.ir.prog.ops[i].kind != "elem":
                continue
            if i in available:
                reuse.add(i)
                continue
            compute.add(i)
            stack.extend(a for a in self.ir.prog.ops[i].args if isinstance(a, int))
        return sorted(compute), sorted(reuse)

    def _body(self, roots, available: set[int], tail: list[str]) -> list[str]:
        compute, reuse = self._closure(roots, available)
        lines = ["const int64_t f = base[t] + c * inner;"]
        lines += self.cp.loads(self.cp.used_operands(compute, roots))
        lines += [f"const float v{i} = buf{i}[t * R + c];" for i in reuse]
        for i in compute:
            lines.append(self.cp.stmt(i))
            if i in self.cached:
                lines.append(f"buf{i}[t * R + c] = v{i};")
        available |= set(compute) & self.cached
        return lines + tail

    def _columns(self, body: list[str], simd_cols: bool) -> list[str]:
        """Column loop(s) around the per-row loop ``for t``."""
        vec = self.p.vec > 1
        t_simd = ["#pragma omp simd"] if vec and self.p.coalesce else []
        c_simd = ["#pragma omp simd"] if vec and simd_cols and not self.p.coalesce else []
        inner = [*t_simd, "for (int64_t t = 0; t < nt; ++t) {", *("  " + s for s in body), "}"]
        lane = "const int64_t l = c & (LANES - 1);"
        blk = self.p.block
        if not self.p.split_tail:
            return [
                f"for (int64_t c0 = 0; c0 < R; c0 += {blk}) {{",
                f"  const int64_t ce = std::min<int64_t>(R, c0 + {blk});",
                *("  " + s for s in c_simd),
                "  for (int64_t c = c0; c < ce; ++c) {",
                f"    {lane}",
                *("    " + s for s in inner),
                "  }",
                "}",
            ]
        # Full chunks have a compile-time trip count; the ragged tail runs apart.
        return [
            f"for (int64_t c0 = 0; c0 + {blk} <= R; c0 += {blk}) {{",
            *("  " + s for s in c_simd),
            f"  for (int64_t j = 0; j < {blk}; ++j) {{",
            "    const int64_t c = c0 + j;",
            f"    {lane}",
            *("    " + s for s in inner),
            "  }",
            "}",
            f"for (int64_t c = R - R % {blk}; c < R; ++c) {{",
            f"  {lane}",
            *("  " + s for s in inner),
            "}",
        ]

    def _tile(self) -> list[str]:
        ir, cp = self.ir, self.cp
        row_vals = [
            i for i, op in enumerate(ir.prog.ops) if op.kind == "row" and i not in cp.scalar
        ]
        lines = [
            "const int64_t o = tile / per_o, i0 = (tile % per_o) * rt;",
            "const int64_t nt = std::min<int64_t>(rt, inner - i0);",
            "int64_t base[ROWS];",
            "for (int64_t t = 0; t < nt; ++t) base[t] = o * R * inner + i0 + t;",
        ]
        lines += [f"float r{i}[ROWS];" for i in row_vals]
        available: set[int] = set()
        for k, ps in enumerate(self.sched.passes):
            updates = [s for r in ps.reds for s in red.update(r, cp.ref(r.arg), self.m)]
            lines += [s for r in ps.reds for s in red.init(r)]
            lines += self._columns(self._body(self.roots[k], available, updates), False)
            lines += [s for r in ps.reds for s in red.finish(r, self.m)]
            if ps.after:
                lines += [
                    "for (int64_t t = 0; t < nt; ++t) {",
                    *("  " + cp.stmt(i) for i in ps.after),
                    "}",
                ]
        if ir.out_kind == "elem":
            store = [f"out_p[f] = {cp.ref(ir.prog.out)};"]
            lines += self._columns(self._body(self.roots[-1], available, store), True)
        else:
            cast = "(int64_t)" if ir.out_dtype == "int64" else ""
            lines += [
                "for (int64_t t = 0; t < nt; ++t) "
                f"out_p[o * inner + i0 + t] = {cast}{cp.ref(ir.prog.out)};"
            ]
        return lines

    def function(self) -> str:
        ir, p = self.ir, self.p
        tensors, sizes = operand_params(ir.operands)
        out_t = "int64_t" if ir.out_dtype == "int64" else "float"
        params = ", ".join(
            [
                f"{out_t}* __restrict__ out_p",
                *tensors,
                "int64_t outer",
                "int64_t R",
                "int64_t inner",
                *sizes,
            ]
        )
        rows = 16 if p.coalesce else 1
        sched = f"schedule(static, {p.rows})" if p.rows > 1 else "schedule(static)"
        body = [
            *pointers(ir.operands),
            "const float R_f = (float)R;",
            *(self.cp.stmt(i) for i in self.sched.before),
            f"constexpr int64_t ROWS = {rows};",
            f"constexpr int64_t LANES = {8 if p.lanes else 1};",
            "const int64_t rt = (ROWS > 1 && inner > 1) ? std::min<int64_t>(ROWS, inner) : 1;",
            "const int64_t per_o = (inner + rt - 1) / rt;",
            "#pragma omp parallel if(outer * inner * R >= PARALLEL_MIN)",
            "{",
        ]
        body += [f"  std::vector<float> buf{i}((size_t)R * ROWS);" for i in sorted(self.cached)]
        body += [
            f"  #pragma omp for {sched}",
            "  for (int64_t tile = 0; tile < outer * per_o; ++tile) {",
            *("    " + s for s in self._tile()),
            "  }",
            "}",
        ]
        return (
            HEADER + f"\nvoid HTAM_FN({params}) {{\n" + "\n".join("  " + s for s in body) + "\n}\n"
        )


def row_solution(ir: RowIR, p: RowParams, m: Math) -> tuple[tuple[str, str], list[str]]:
    fn, src = cpp_names("row", CppRow(ir, p, m).function())
    lines = [f"t_{op.name} = {op.source}.contiguous()" for op in ir.operands]
    lines += row_sizes(ir)
    t_args, s_args = operand_args(ir.operands, f"t_{ir.primary}")
    call = ", ".join(["out.data_ptr()", *t_args, "outer", "R", "inner", *s_args])
    return (fn, src), lines + [f"_ext.{fn}({call})", "return out"]
