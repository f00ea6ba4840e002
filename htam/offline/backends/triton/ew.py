"""Triton elementwise kernels: one fused kernel, or one kernel per op (the unfused baseline)."""

from __future__ import annotations

from htam.offline.backends.triton.common import TileProgram, operand_args, operand_params
from htam.offline.ir.expr import Math
from htam.offline.ir.model import Op, Operand, Program
from htam.offline.params import EwParams


def _body(tp: TileProgram, mask: str | None) -> list[str]:
    ops = list(range(len(tp.prog.ops)))
    lines = tp.loads(tp.used_operands(ops, [tp.prog.out]), "offs", mask)
    lines += [tp.stmt(i) for i in ops]
    value = tp.ref(tp.prog.out, True)
    lines.append(f"tl.store(out_ptr + offs, {value}" + (f", mask={mask})" if mask else ")"))
    return lines


def ew_kernel(name: str, prog: Program, operands: list[Operand], p: EwParams, m: Math) -> str:
    tp = TileProgram(prog, operands, m)
    params = [
        "out_ptr",
        *operand_params(operands),
        "n",
        "start",
        "BLOCK: tl.constexpr",
        "MASKED: tl.constexpr",
    ]
    lines = ["pid = tl.program_id(0)", "offs = start + pid * BLOCK + tl.arange(0, BLOCK)"]
    if p.vec > 1:  # each contiguous run of BLOCK starts at a multiple of BLOCK: 128-bit access
        lines.append("offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)")
    lines += tp.scalar_loads()
    if p.split_tail:
        lines.append("if MASKED:")
        lines += ["    mask = offs < n", *("    " + s for s in _body(tp, "mask")), "else:"]
        lines += ["    " + s for s in _body(tp, None)]
    else:
        lines += ["mask = offs < n", *_body(tp, "mask")]
    return "\n".join(
        ["@triton.jit", f"def {name}({', '.join(params)}):", *("    " + s for s in lines)]
    )


def warps_for(p: EwParams, block: int) -> int:
    """num_warps, capped so each thread owns at least ``vec`` contiguous elements."""
    return max(1, min(p.warps, block // (32 * p.vec)))


def launch(kernel: str, args: list[str], p: EwParams, n: str = "n") -> list[str]:
    block = p.block
    call = f"{', '.join(args)}, {n}"
    opts = f"BLOCK={block}, num_warps={warps_for(p, block)}"
    if not p.split_tail:
        return [f"{kernel}[(triton.cdiv({n}, {block}),)]({call}, 0, {opts}, MASKED=True)"]
    return [
        f"full = {n} // {block}",
        "if full > 0:",
        f"    {kernel}[(full,)]({call}, 0, {opts}, MASKED=False)",
        f"if {n} % {block}:",
        f"    {kernel}[(1,)]({call}, full * {block}, {opts}, MASKED=True)",
    ]


def _split(prog: Program, operands: list[Operand]) -> list[tuple[Program, list[Operand]]]:
    """One single-op program per op; earlier results are read back from full buffers."""
    by_name = {op.name: op for op in operands}
    out = []
    for op in prog.ops:
        args = tuple(f"tmp{a}" if isinstance(a, int) else a for a in op.args)
        used = [
            by_name[a] if a in by_name else Operand(a, a, "full")
            for a in dict.fromkeys(x for x in args if isinstance(x, str))
        ]
        out.append((Program([Op(op.name, args, op.attrs, op.kind)], 0), used))
    return out


def ew_section(
    name: str, prog: Program, operands: list[Operand], p: EwParams, m: Math, out: str = "out"
) -> tuple[list[str], list[str]]:
    """(kernels, forward lines) computing ``prog`` into ``out`` (already allocated)."""
    if p.fuse or len(prog.ops) == 1:
        args = [out, *operand_args(operands, out)]
        return [ew_kernel(name, prog, operands, p, m)], launch(name, args, p, f"{out}.numel()")
    kernels, lines = [], []
    last = len(prog.ops) - 1
    for i, (single, used) in enumerate(_split(prog, operands)):
        kname = f"{name}_op{i}"
        target = out if i == last else f"t_tmp{i}"
        if i != last:
            lines.append(f"t_tmp{i} = torch.empty_like({out})")
        kernels.append(ew_kernel(kname, single, used, p, m))
        lines += launch(kname, [target, *operand_args(used, out)], p, f"{out}.numel()")
    return kernels, lines


def ew_solution(ir, p: EwParams, m: Math) -> tuple[list[str], list[str]]:
    """(kernels, forward lines) for the elementwise family."""
    lines = [f"t_{op.name} = {op.source}.contiguous()" for op in ir.operands]
    src = f"t_{ir.primary}"
    lines.append(f"out = torch.empty({src}.shape, dtype=torch.float32, device={src}.device)")
    kernels, launch_lines = ew_section("htam_ew", ir.prog, ir.operands, p, m)
    return kernels, lines + launch_lines + ["return out"]
