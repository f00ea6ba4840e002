"""Triton scan kernel: ``ROWS`` rows per program, each walked in tiles of ``BLOCK`` columns;
``tl.cumsum`` / ``tl.cumprod`` scan a tile and a per-row carry joins it to the tiles before.

A row is the scanned dim at one (outer, inner) position of the ``(outer, R, inner)`` view, so
the element ``r`` of row ``(o, i)`` is at ``o * R * inner + r * inner + i``; a reverse scan
walks ``r`` from ``R - 1`` down. Masked lanes hold the combine's identity, so the tile's last
column is the running total whatever the row's length.
"""

from __future__ import annotations

from htam.offline.backends.triton.common import TileProgram, operand_args, operand_params
from htam.offline.ir.expr import Math
from htam.offline.ir.model import ScanIR
from htam.offline.params import ScanParams


def _tile_lines(tp: TileProgram, ir: ScanIR) -> list[str]:
    one = "1.0" if ir.combine == "prod" else "0.0"
    pos = "R - 1 - c" if ir.reverse else "c"
    lines = [
        "c = start + cols",
        f"pos = {pos}",
        "offs = base[:, None] + pos[None, :].to(tl.int64) * inner",
        "mask = rmask[:, None] & (c < R)[None, :]",
    ]
    ops = list(range(len(tp.prog.ops)))
    lines += tp.loads(tp.used_operands(ops, [tp.prog.out]), "offs", "mask")
    lines += [tp.stmt(i) for i in ops]
    lines.append(f"v = tl.where(mask, {tp.ref(tp.prog.out, True)}, {one})")
    if ir.combine == "prod":
        lines.append("s = tl.cumprod(v, axis=1) * carry[:, None]")
    else:
        lines.append("s = tl.cumsum(v, axis=1) + carry[:, None]")
    stored = "s - v" if ir.exclusive else "s"
    return lines + [
        f"tl.store(out_ptr + offs, {stored}, mask=mask)",
        "carry = tl.sum(tl.where(cols[None, :] == BLOCK - 1, s, 0.0), axis=1)",
    ]


def scan_kernel(name: str, ir: ScanIR, m: Math) -> str:
    tp = TileProgram(ir.prog, ir.operands, m)
    params = [
        "out_ptr",
        *operand_params(ir.operands),
        "n_rows",
        "R",
        "inner",
        "ROWS: tl.constexpr",
        "BLOCK: tl.constexpr",
    ]
    one = "1.0" if ir.combine == "prod" else "0.0"
    lines = [
        "pid = tl.program_id(0)",
        "rows = pid * ROWS + tl.arange(0, ROWS)",
        "rmask = rows < n_rows",
        "rows = tl.minimum(rows, n_rows - 1).to(tl.int64)",
        "base = (rows // inner) * R * inner + rows % inner",
        "cols = tl.arange(0, BLOCK)",
        f"carry = tl.full([ROWS], {one}, tl.float32)",
        *tp.scalar_loads(),
        "for start in range(0, R, BLOCK):",
        *("    " + s for s in _tile_lines(tp, ir)),
    ]
    return "\n".join(
        ["@triton.jit", f"def {name}({', '.join(params)}):", *("    " + s for s in lines)]
    )


def scan_solution(ir: ScanIR, p: ScanParams, m: Math) -> tuple[list[str], list[str]]:
    """(kernels, forward lines) for the scan family."""
    lines = [f"t_{op.name} = {op.source}.contiguous()" for op in ir.operands]
    prim = f"t_{ir.primary}"
    args = ", ".join(["out", *operand_args(ir.operands, "out"), "n_rows", "R", "inner"])
    lines += [
        f"shape = tuple({prim}.shape)",
        f"out = torch.empty(shape, dtype=torch.float32, device={prim}.device)",
        "if out.numel() == 0:",
        "    return out",
        f"R = shape[{ir.dim}]",
        f"inner = math.prod(shape[{ir.dim + 1}:])",
        "n_rows = out.numel() // R",
        f"rows = {p.rows}",
        f"block = min({p.block}, triton.next_power_of_2(R))",
        f"warps = max(1, min({p.warps}, rows * block // 32))",
        "grid = (triton.cdiv(n_rows, rows),)",
        f"htam_scan[grid]({args}, ROWS=rows, BLOCK=block, num_warps=warps)",
        "return out",
    ]
    return [scan_kernel("htam_scan", ir, m)], lines
