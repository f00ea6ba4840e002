"""Triton elementwise kernels: one fused kernel, or one kernel per op (the unfused baseline)."""

from __future__ import annotations

from htam.offline.backends.triton.common import (
    TileProgram,
    operand_args,
    operand_index,
    operand_params,
)
from htam.offline.ir.expr import Math
from htam.offline.ir.model import Op, Operand, Program
from htam.offline.ir.views import per_channel
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


def ew_cl_kernel(
    name: str, prog: Program, operands: list[Operand], rank: int, p: EwParams, m: Math
) -> str:
    """The fused chain over [BLOCK_S, BLOCK_C] tiles of one sample: the library results read
    channels-last (contiguous along C), every other operand and the output in the reference's
    order (contiguous along the spatial positions S); Triton transposes the tile on chip."""
    tp = TileProgram(prog, operands, m)
    params = ["out_ptr", *operand_params(operands), "C", "S"]
    params += ["BLOCK_S: tl.constexpr", "BLOCK_C: tl.constexpr"]
    lines = [
        "b = tl.program_id(2).to(tl.int64)",
        "s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)[:, None]",
        "c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]",
        "mask = (s < S) & (c < C)",
        "offs = b * C * S + c * S + s  # the output's (and the reference layout's) flat index",
        "offs_cl = b * C * S + s * C + c  # the same element in channels-last memory",
        *tp.scalar_loads(),
    ]
    ops = list(range(len(prog.ops)))
    for op in tp.used_operands(ops, [prog.out]):
        if op.pattern == "scalar":
            continue
        at, where = operand_index(op, "offs"), "mask"
        if op.library_result:
            at = "offs_cl"
        elif per_channel(op, rank):  # one value per channel of the tile, broadcast over S
            at, where = "c", "c < C"
        lines.append(f"in_{op.name} = tl.load({op.name}_ptr + {at}, mask={where}, other=0.0)")
    lines += [tp.stmt(i) for i in ops]
    lines.append(f"tl.store(out_ptr + offs, {tp.ref(prog.out, True)}, mask=mask)")
    return "\n".join(
        ["@triton.jit", f"def {name}({', '.join(params)}):", *("    " + s for s in lines)]
    )


def _cl_solution(ir, p: EwParams, m: Math) -> tuple[list[str], list[str]]:
    fmt = "torch.channels_last" if ir.rank == 4 else "torch.channels_last_3d"
    lines = [
        f"t_{op.name} = {op.source}.contiguous(memory_format={fmt})"  # no copy: the conv wrote it
        if op.library_result
        else f"t_{op.name} = {op.source}.contiguous()"
        for op in ir.operands
    ]
    src = f"t_{ir.primary}"
    args = ", ".join(["out", *operand_args(ir.operands, "out")])
    lines += [
        f"out = torch.empty({src}.shape, dtype=torch.float32, device={src}.device)",
        "C = out.shape[1]",
        "S = math.prod(out.shape[2:])",
        "if out.numel():",
        "    bc = min(32, triton.next_power_of_2(C))",
        f"    bs = max(16, {p.block} // bc)",
        f"    htam_ew[(triton.cdiv(S, bs), triton.cdiv(C, bc), out.shape[0])]({args}, C, S, "
        f"BLOCK_S=bs, BLOCK_C=bc, num_warps={p.warps})",
        "return out",
    ]
    return [ew_cl_kernel("htam_ew", ir.prog, ir.operands, ir.rank, p, m)], lines


def ew_solution(ir, p: EwParams, m: Math) -> tuple[list[str], list[str]]:
    """(kernels, forward lines) for the elementwise family."""
    if p.layout:
        return _cl_solution(ir, p, m)
    lines = [f"t_{op.name} = {op.source}.contiguous()" for op in ir.operands]
    src = f"t_{ir.primary}"
    lines.append(f"out = torch.empty({src}.shape, dtype=torch.float32, device={src}.device)")
    kernels, launch_lines = ew_section("htam_ew", ir.prog, ir.operands, p, m)
    return kernels, lines + launch_lines + ["return out"]
