"""Triton GEMM (tl.dot on tensor cores) with the epilogue fused or run as separate kernels.

Per shape, at run time (``_htam_gemm_plan``, :mod:`.gemm_plan`): the precision (TF32 where the
evaluator's float32 tolerance allows it for this K), the tile, and whether an operand is first
copied into the order the dot reads fastest; ``M == 1`` or ``N == 1`` runs a matrix-vector
kernel instead (memory bound: rows per program, vector loads along K).

Split-K, chosen per shape at run time: when the output tiles (``cdiv(M, BM) * cdiv(N, BN) *
batch``) are fewer than the GPU's SMs and K spans at least four K steps, K is cut into
``split`` chunks (a multiple of BK each) so that about two programs per SM run; each program
writes its fp32 partial product to a workspace and one more kernel sums the partials in a fixed
order (deterministic, no atomics), then the epilogue runs. This is what a large-K product
(M = N = 256, K = 524288: 4 tiles of 128x128) needs to use the whole GPU. Operands are read
through their strides unless the plan copies one (a transposed view is otherwise never copied).
"""

from __future__ import annotations

from dataclasses import replace

from htam.offline.backends.triton.common import (
    TileProgram,
    operand_args,
    operand_index,
    operand_params,
)
from htam.offline.backends.triton.ew import ew_section
from htam.offline.backends.triton.gemm_plan import (
    COPY_HELPER,
    gemv_kernel,
    gemv_launch,
    gemv_params,
    gemv_rule,
    layout_lines,
    plan_helper,
)
from htam.offline.ir.expr import Math
from htam.offline.ir.model import GemmIR
from htam.offline.ir.views import GEMM_OUT, gemm_prelude, separate_epilogue
from htam.offline.params import EwParams, GemmParams


def _mapping(p: GemmParams) -> list[str]:
    if p.group_m > 1:  # grouped order: programs that run together share rows of A (L2 reuse)
        return [
            "group = GROUP_M * num_n",
            "first = (pid // group) * GROUP_M",
            "gsize = tl.minimum(num_m - first, GROUP_M)",
            "pm = first + (pid % group) % gsize",
            "pn = (pid % group) // gsize",
        ]
    return ["pm = pid // num_n", "pn = pid % num_n"]


def _mainloop(p: GemmParams) -> list[str]:
    lines = ["rk = tl.arange(0, BK)"]
    if p.split_tail:  # wrapped indices keep every load in bounds: only K needs a mask
        lines += ["am = rm % M", "bn = rn % N"]
    else:
        lines += ["am = rm", "bn = rn"]
    if p.vec > 1:
        lines += [
            "am = tl.max_contiguous(tl.multiple_of(am, BM), BM)",
            "bn = tl.max_contiguous(tl.multiple_of(bn, BN), BN)",
        ]
    lines += [
        "a_ptrs = a_ptr + bid * s_ab + am[:, None] * s_am + (k_lo + rk)[None, :] * s_ak",
        "b_ptrs = b_ptr + bid * s_bb + (k_lo + rk)[:, None] * s_bk + bn[None, :] * s_bn",
        "acc = tl.zeros((BM, BN), dtype=tl.float32)",
        "for k0 in range(k_lo, k_hi, BK):",
    ]
    if p.split_tail:
        body = [
            "if EVEN_K:",
            "    a = tl.load(a_ptrs)",
            "    b = tl.load(b_ptrs)",
            "else:",
            "    a = tl.load(a_ptrs, mask=(k0 + rk)[None, :] < k_hi, other=0.0)",
            "    b = tl.load(b_ptrs, mask=(k0 + rk)[:, None] < k_hi, other=0.0)",
        ]
    else:
        body = [
            "a = tl.load(a_ptrs, mask=(rm[:, None] < M) & ((k0 + rk)[None, :] < k_hi), other=0.0)",
            "b = tl.load(b_ptrs, mask=((k0 + rk)[:, None] < k_hi) & (rn[None, :] < N), other=0.0)",
        ]
    body += [
        "if TF32:  # the plan's choice (see _htam_gemm_plan)",
        '    acc = tl.dot(a, b, acc, input_precision="tf32")',
        "else:",
        '    acc = tl.dot(a, b, acc, input_precision="ieee")',
        "a_ptrs += BK * s_ak",
        "b_ptrs += BK * s_bk",
    ]
    return lines + ["    " + s for s in body]


def _epilogue(ir: GemmIR, m: Math, fused: bool, rank: int) -> list[str]:
    lines = [
        "flat = bid * M * N + rm[:, None] * N + rn[None, :]",
        "cmask = (rm[:, None] < M) & (rn[None, :] < N)",
    ]
    if not fused:
        return lines + ["tl.store(c_ptr + flat, acc, mask=cmask)"]
    tp = TileProgram(ir.epilogue, ir.operands, m)
    ops = list(range(len(ir.epilogue.ops)))
    lines += tp.scalar_loads()
    for op in tp.used_operands(ops, [ir.epilogue.out]):
        if op.pattern == "scalar":
            continue
        if op.pattern == "trail" and op.head == rank - 1:  # along N only: a bias vector
            lines.append(
                f"in_{op.name} = tl.load({op.name}_ptr + rn, mask=rn < N, other=0.0)[None, :]"
            )
        else:
            idx = operand_index(op, "flat")
            lines.append(f"in_{op.name} = tl.load({op.name}_ptr + {idx}, mask=cmask, other=0.0)")
    lines += [tp.stmt(i) for i in ops]
    return lines + [f"tl.store(c_ptr + flat, {tp.ref(ir.epilogue.out, True)}, mask=cmask)"]


def gemm_kernel(ir: GemmIR, p: GemmParams, m: Math) -> str:
    fused = p.epilogue == "fused"
    extra = operand_params(ir.operands) if fused else []
    params = [
        "a_ptr",
        "b_ptr",
        "c_ptr",
        "ws_ptr",
        *extra,
        "M",
        "N",
        "K",
        "s_ab",
        "s_am",
        "s_ak",
        "s_bb",
        "s_bk",
        "s_bn",
        "K_CHUNK",
        "WS_STRIDE",
        "BM: tl.constexpr",
        "BN: tl.constexpr",
        "BK: tl.constexpr",
        "GROUP_M: tl.constexpr",
        "EVEN_K: tl.constexpr",
        "SPLIT: tl.constexpr",
        "TF32: tl.constexpr",
    ]
    epilogue = _epilogue(ir, m, fused, ir.out_rank)
    store = [  # split-K: the fp32 partial of this K chunk, summed by htam_gemm_sum
        "if SPLIT:",
        "    tl.store(ws_ptr + sid * WS_STRIDE + flat, acc, mask=cmask)",
        "else:",
        *("    " + s for s in epilogue[2:]),
    ]
    lines = [
        "pid = tl.program_id(0)",
        "bid = tl.program_id(1)",
        "num_m = tl.cdiv(M, BM)",
        "num_n = tl.cdiv(N, BN)",
        *_mapping(p),
        "rm = pm * BM + tl.arange(0, BM)",
        "rn = pn * BN + tl.arange(0, BN)",
        "sid = tl.program_id(2)",
        "k_lo = sid * K_CHUNK",
        "k_hi = tl.minimum(K, k_lo + K_CHUNK)",
        *_mainloop(p),
        *epilogue[:2],
        *store,
    ]
    gemv = gemv_kernel(gemv_params(extra), epilogue[:2], store)
    kernel = "\n".join(
        ["@triton.jit", f"def htam_gemm({', '.join(params)}):", *("    " + s for s in lines)]
    )
    return kernel + "\n\n\n" + gemv


SUM_KERNEL = """@triton.jit
def htam_gemm_sum(ws_ptr, c_ptr, n, split, BLOCK: tl.constexpr):
    # split-K: the partial products summed in a fixed order (deterministic)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in range(0, split):
        acc += tl.load(ws_ptr + s * n + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc, mask=mask)"""


def split_rule() -> list[str]:
    """Forward lines choosing split-K from the run-time shape and tile (module docstring)."""
    return [
        "tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn) * batch",
        "split = 1",
        "if tiles < sms and K >= 4 * bk:",
        "    split = max(1, min(triton.cdiv(2 * sms, tiles), K // (2 * bk)))",
        "k_chunk = triton.cdiv(triton.cdiv(K, split), bk) * bk",
        "split = triton.cdiv(K, k_chunk)",
    ]


def _gemm_lines(ir: GemmIR, p: GemmParams, target: str, extra: str) -> tuple[list, list]:
    """(the plan for this shape, the copies it asks for and split-K; the GEMM launch)."""
    copy_a = layout_lines("ga", ir.a.transposed, 2)
    copy_b = layout_lines("gb", ir.b.transposed, 1)
    copy_bn = layout_lines("gb", ir.b.transposed, 2)
    prep = [
        "tf32, (bm, bn, bk, warps, stages), copy_a, copy_b = _htam_gemm_plan(",
        "    M, N, K, batch, ga_sc == 1, gb_sr == 1, gb_sc == 1, sms)",
        "if copy_a:  # A K-major for TF32 (wgmma)",
        *("    " + s for s in copy_a),
        "if copy_b and tf32:  # B K-major for TF32 (wgmma)",
        *("    " + s for s in copy_b),
        "elif copy_b:  # B N-major for the FMA path",
        *("    " + s for s in copy_bn),
        *split_rule(),
    ]
    return prep, [
        "grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn), batch, split)",
        f"htam_gemm[grid](ga3, gb3, {target}, ws, {extra}M, N, K, ga_sb, ga_sr, ga_sc, "
        "gb_sb, gb_sr, gb_sc, k_chunk, out.numel(), BM=bm, BN=bn, BK=bk, "
        f"GROUP_M={p.group_m}, EVEN_K=(K % bk == 0), SPLIT=split > 1, TF32=tf32, "
        "num_warps=warps, num_stages=stages)",
    ]


def gemm_solution(ir: GemmIR, p: GemmParams, m: Math) -> tuple[list[str], list[str]]:
    fused = p.epilogue == "fused"
    lines = [f"t_{op.name} = {op.source}.contiguous()" for op in ir.operands]
    lines += gemm_prelude(ir)
    target = "out" if fused or not ir.has_epilogue else f"t_{GEMM_OUT}"
    if target != "out":
        lines.append(f"{target} = torch.empty_like(out)")
    extra = ", ".join(operand_args(ir.operands, "out")) + ", " if fused and ir.operands else ""
    prep, launch = _gemm_lines(ir, p, target, extra)
    lines += [
        "sms = torch.cuda.get_device_properties(out.device).multi_processor_count "
        "if out.is_cuda else 132  # H200: 132 SMs",
        "if M == 1 or N == 1:  # matrix-vector: memory bound, no tl.dot",
        *("    " + s for s in gemv_rule()),
        "else:",
        *("    " + s for s in prep),
        "ws = torch.empty((split, out.numel()), dtype=torch.float32, device=out.device) "
        "if split > 1 else out",
        "if M == 1 or N == 1:",
        *("    " + s for s in gemv_launch(target, extra)),
        "else:",
        *("    " + s for s in launch),
    ]
    kernels = [plan_helper(p), COPY_HELPER, gemm_kernel(ir, p, m), SUM_KERNEL]
    ew = EwParams(block=1024, warps=4, vec=p.vec, split_tail=p.split_tail)
    prog, operands = separate_epilogue(ir)
    summed = "out" if not (fused and ir.has_epilogue) else f"t_{GEMM_OUT}"
    split_lines = ["if split > 1:"]
    if summed != "out" and target == "out":
        split_lines.append(f"    {summed} = torch.empty_like(out)")
    split_lines.append(
        f"    htam_gemm_sum[(triton.cdiv(out.numel(), 1024),)](ws, {summed if target == 'out' else target}, "
        "out.numel(), split, BLOCK=1024)"
    )
    if fused and ir.has_epilogue:  # the epilogue after the sum, as one kernel
        more, ew_lines = ew_section(
            "htam_split_epilogue", prog, operands, replace(ew, fuse=True), m
        )
        kernels += more
        split_lines += ["    " + s for s in ew_lines]
    lines += split_lines
    if not fused and ir.has_epilogue:
        more, ew_lines = ew_section(
            "htam_epilogue", prog, operands, replace(ew, fuse=p.epilogue == "kernel"), m
        )
        kernels += more
        lines += ew_lines
    return kernels, lines + ["return out"]
