"""Triton row kernels: ``ROWS`` rows per program, a loop over each row in tiles of ``BLOCK``.

Kernels: ``_loop`` (one loop per pass, any row length) and, with the register row cache,
``_tile`` (the whole row held in registers, loaded once, every pass done in place), used when a
row fits. Row ids are clamped to the last row so loads never need a row mask; only stores do.
When the reduced dims are not the last ones, ``_coal`` (and ``_ctile``) serve every shape with
``inner > 1``: a program owns adjacent inner indices of one outer index, the tile's contiguous
axis, so every load of the walk along the reduced dim is coalesced; partials stay per lane.
Few long rows are split over many programs (:mod:`.split`); with the register cache, a row too
long for one program is read once on a GPU by chunks that wait for each other (:mod:`.coop`).
"""

from __future__ import annotations

from dataclasses import replace

from htam.offline.backends.triton import reduce as red
from htam.offline.backends.triton.common import (
    TileProgram,
    operand_args,
    operand_index,
    operand_params,
)
from htam.offline.backends.triton.coop import CoopKernels
from htam.offline.backends.triton.split import SplitKernels, split_lines
from htam.offline.ir.expr import Math
from htam.offline.ir.model import RowIR
from htam.offline.ir.passes import Schedule, schedule
from htam.offline.ir.views import channels_last_rows, row_sizes
from htam.offline.params import RowParams

CACHE_LIMIT = 16384  # elements of a [ROWS, BLOCK] tile kept in registers
# The coalesced path narrows its row blocks until about this many programs run (8 per SM of an
# H200's 132), so that a middle-dim reduction with a small outer size still fills the GPU.
COAL_PROGRAMS = 1024


def _col_operand(ir: RowIR, op) -> bool:
    """An operand laid along exactly the reduced (trailing) dims: indexed by column alone."""
    return op.pattern == "trail" and op.head == ir.d0 and ir.d1 == ir.rank - 1


class RowKernel:
    def __init__(self, ir: RowIR, p: RowParams, m: Math, coal: bool = False):
        # The coalesced kernel always keeps per-lane partials: a [ROWS, BLOCK] tile is reduced
        # across its R lanes once per row block, not once per tile.
        self.ir, self.p, self.m, self.coal = ir, replace(p, lanes=True) if coal else p, m, coal
        self.tp = TileProgram(ir.prog, ir.operands, m)
        self.sched: Schedule = schedule(ir.prog, p.online, p.welford)

    # -- pieces ---------------------------------------------------------------------------
    def _loads(
        self, ops: list[int], masked: bool, extra=(), colmask="cols < R", loaded=()
    ) -> list[str]:
        """Loads of the operands ``ops`` and ``extra`` use, but those ``loaded`` already."""
        lines = []
        for op in self.tp.used_operands(ops, list(extra)):
            if op.pattern == "scalar" or op in loaded:
                continue
            if _col_operand(self.ir, op):
                mask = f", mask={colmask}, other=0.0" if masked else ""
                lines.append(f"in_{op.name} = tl.load({op.name}_ptr + cols{mask})[None, :]")
            else:
                mask = ", mask=cmask, other=0.0" if masked else ""
                idx = operand_index(op, "flat")
                lines.append(f"in_{op.name} = tl.load({op.name}_ptr + {idx}{mask})")
        return lines

    def _prologue(self) -> list[str]:
        if self.coal:
            # ROWS adjacent inner indices of one outer index: the tile's contiguous axis. The
            # grid is folded into axis 0 (no 65535 limit on the outer count); the last block is
            # shifted back (ROWS <= INNER) rather than masked, so loads need no row mask and the
            # contiguity stays provable; rows it shares with its neighbour are computed twice.
            lines = [
                "nb = tl.cdiv(INNER, ROWS)",
                "o = tl.program_id(0) // nb",
                "i0 = tl.minimum((tl.program_id(0) % nb) * ROWS, INNER - ROWS)",
                "ii = i0 + tl.arange(0, ROWS)",
                "rmask = ii < INNER",
                "rows = o * INNER + ii",
                "base = o * (R * INNER) + ii",
            ]
        else:
            lines = [
                "rows = tl.program_id(0) * ROWS + tl.arange(0, ROWS)",
                "rmask = rows < n_rows",
                "rc = tl.minimum(rows, n_rows - 1)",
                "base = (rc // INNER) * (R * INNER) + rc % INNER",
            ]
        lines += self.tp.scalar_loads()
        return lines + [self.tp.stmt(i) for i in self.sched.before]

    def _cols(self, start: str) -> list[str]:
        cols = f"{start} + tl.arange(0, BLOCK)"
        if self.p.vec > 1:  # tiles start at multiples of BLOCK: vector loads along the row
            cols = f"tl.max_contiguous(tl.multiple_of({cols}, BLOCK), BLOCK)"
        return [
            f"cols = {cols}",
            "cmask = cols[None, :] < R",
            "flat = base[:, None] + cols[None, :] * INNER",
        ]

    def _loop(self, body) -> list[str]:
        """A loop over the row's tiles running ``body(masked)``; split tails run unmasked.

        The tail is a second loop of zero or one trip rather than an ``if``: an accumulator
        threaded through an ``scf.if`` trips Triton's thread-locality pass (two uses)."""
        if not self.p.split_tail:
            return [
                "for c0 in range(0, R, BLOCK):",
                *("    " + s for s in self._cols("c0") + body(True)),
            ]
        return [
            "for c0 in range(0, R - R % BLOCK, BLOCK):",
            *("    " + s for s in self._cols("c0") + body(False)),
            "for c0 in range(R - R % BLOCK, R, BLOCK):",
            *("    " + s for s in self._cols("c0") + body(True)),
        ]

    def _pass_body(self, p, masked: bool) -> list[str]:
        lines = self._loads(p.elems, masked, [r.arg for r in p.reds])
        lines += [self.tp.stmt(i) for i in p.elems]
        for r in p.reds:
            lines += red.update(r, self.tp.ref(r.arg, True), masked, self.p.lanes, self.m)
        return lines

    def _store_body(self, masked: bool) -> list[str]:
        final = self.sched.final
        lines = self._loads(final, masked, [self.ir.prog.out])
        lines += [self.tp.stmt(i) for i in final]
        mask = "rmask[:, None] & cmask" if masked else "rmask[:, None]"
        value = self.tp.ref(self.ir.prog.out, True)
        return lines + [f"tl.store(out_ptr + flat, {value}, mask={mask})"]

    def _store_rows(self) -> list[str]:
        return [f"tl.store(out_ptr + rows, {self.tp.ref(self.ir.prog.out, False)}, mask=rmask)"]

    # -- kernels --------------------------------------------------------------------------
    def _signature(self, name: str) -> str:
        params = [
            "out_ptr",
            *operand_params(self.ir.operands),
            "n_rows",
            "R",
            "INNER",
            "R_f",
            "ROWS: tl.constexpr",
            "BLOCK: tl.constexpr",
        ]
        return f"@triton.jit\ndef {name}({', '.join(params)}):"

    def loop_kernel(self, name: str) -> str:
        lanes = self.p.lanes
        lines = self._prologue()
        for p in self.sched.passes:
            for r in p.reds:
                lines += red.init(r, lanes)
            lines += self._loop(lambda masked, p=p: self._pass_body(p, masked))
            for r in p.reds:
                lines += red.finish(r, lanes, self.m)
            lines += [self.tp.stmt(i) for i in p.after]
        lines += self._loop(self._store_body) if self.ir.out_kind == "elem" else self._store_rows()
        return self._signature(name) + "\n" + "\n".join("    " + s for s in lines)

    def tile_kernel(self, name: str) -> str:
        """Whole rows in registers: every value is computed once, reductions are in place."""
        lines = self._prologue() + self._cols("0")
        ops = range(len(self.ir.prog.ops))
        lines += self._loads(list(ops), True, [self.ir.prog.out])
        for i in ops:
            op = self.ir.prog.ops[i]
            if i in self.sched.before:
                continue
            if op.name in ("rsum", "rmax", "rmin", "rargmax", "rargmin"):
                lines += _tile_reduce(i, op.name, self.tp.ref(op.args[0], True))
            else:
                lines.append(self.tp.stmt(i))
        if self.ir.out_kind == "elem":
            value = self.tp.ref(self.ir.prog.out, True)
            lines.append(f"tl.store(out_ptr + flat, {value}, mask=rmask[:, None] & cmask)")
        else:
            lines += self._store_rows()
        return self._signature(name) + "\n" + "\n".join("    " + s for s in lines)


def _tile_reduce(i: int, name: str, x: str) -> list[str]:
    if name == "rsum":
        return [f"r{i} = tl.sum(tl.where(cmask, {x}, 0.0), axis=1)"]
    if name in ("rmax", "rmin"):
        ident = red.NEG if name == "rmax" else red.POS
        return [f"r{i} = tl.{name[1:]}(tl.where(cmask, {x}, {ident}), axis=1)"]
    f, ident = ("max", red.NEG) if name == "rargmax" else ("min", red.POS)
    return [
        f"xv = tl.where(cmask, {x}, {ident})",
        f"bv = tl.{f}(xv, axis=1)",
        f"r{i} = tl.min(tl.where(xv == bv[:, None], cols[None, :], {red.BIG}), axis=1)",
    ]


def row_solution(ir: RowIR, p: RowParams, m: Math) -> tuple[list[str], list[str]]:
    """(kernels, forward lines) for the row family."""
    # channels-last rows: the reduced tensor read with its channels last (no copy)
    moved = {ir.primary: ".movedim(1, -1)"} if p.layout else {}
    lines = [
        f"t_{op.name} = {op.source}{moved.get(op.name, '')}.contiguous()" for op in ir.operands
    ]
    lines += row_sizes(ir, moved=p.layout)
    if p.layout:
        ir = channels_last_rows(ir)
    k = RowKernel(ir, p, m)
    kernels = [k.loop_kernel("htam_row_loop")]
    if p.cache:
        kernels.append(k.tile_kernel("htam_row_tile"))
    strided = ir.d1 < ir.rank - 1  # inner > 1 possible: the coalesced kernels are written too
    if strided:
        c = RowKernel(ir, p, m, coal=True)
        kernels.append(c.loop_kernel("htam_row_coal"))
        if p.cache:
            kernels.append(c.tile_kernel("htam_row_ctile"))
    head = ["out", *operand_args(ir.operands, f"t_{ir.primary}")]
    args = ", ".join([*head, "n_rows", "R", "inner", "float(R)"])
    split = SplitKernels(RowKernel(ir, replace(p, lanes=False), m))
    kernels += split.kernels()
    lines += [f"rows = {p.rows}", f"block = min({p.block}, triton.next_power_of_2(R))"]
    coop = CoopKernels(RowKernel(ir, CoopKernels.params(p), m))
    if CoopKernels.applies(coop.k):
        kernels += coop.kernels()
        lines += coop.launch_lines(head, f"rows * triton.next_power_of_2(R) <= {CACHE_LIMIT}")
    warps = f"max(1, min({max(4, p.warps)}, block // {32 * p.vec}))"
    lines += [
        *split_lines(),
        "if split > 1:",
        *("    " + s for s in split.launch_lines(head, warps)),
        "    return out",
    ]
    if strided:
        lines += ["if inner > 1:", *("    " + s for s in coal_lines(p, args)), "    return out"]
    warps = f"max(1, min({p.warps}, rows * block // {32 * p.vec}))"
    loop = f"htam_row_loop[grid]({args}, ROWS=rows, BLOCK=block, num_warps={warps})"
    lines.append("grid = (triton.cdiv(n_rows, rows),)")
    lines += _cached("htam_row_tile", loop, args) if p.cache else [loop]
    return kernels, lines + ["return out"]


def coal_lines(p: RowParams, args: str) -> list[str]:
    """Forward lines of the coalesced path (the reduced dims are not the last ones).

    A program owns ``rows`` adjacent inner indices (a power of two <= inner: up to 64 floats,
    256 contiguous bytes, times the rows-per-program ladder) of one outer index and walks the
    reduced dim in steps of ``block``, a ``[rows, block]`` tile of about ``2 * p.block``
    elements. ``rows`` halves (down to 16) while fewer than COAL_PROGRAMS programs would run."""
    warps = f"max(1, min({max(4, p.warps)}, rows * block // 32))"
    loop = f"htam_row_coal[grid]({args}, ROWS=rows, BLOCK=block, num_warps={warps})"
    lines = [
        f"rows = min({64 * p.rows}, 1 << (inner.bit_length() - 1))",
        f"while rows > 16 and triton.cdiv(inner, rows) * outer < {COAL_PROGRAMS}:",
        "    rows //= 2",
        f"block = max(1, min(triton.next_power_of_2(R), {2 * p.block} // rows))",
        "grid = (triton.cdiv(inner, rows) * outer,)",
    ]
    return lines + (_cached("htam_row_ctile", loop, args) if p.cache else [loop])


def _cached(tile_kernel: str, loop: str, args: str) -> list[str]:
    """The register-cache kernel when a ``[rows, next_pow2(R)]`` tile fits, else ``loop``."""
    warps = "max(1, min(16, rows * tile // 256))"
    return [
        "tile = triton.next_power_of_2(R)",
        f"if rows * tile <= {CACHE_LIMIT}:",
        f"    {tile_kernel}[grid]({args}, ROWS=rows, BLOCK=tile, num_warps={warps})",
        "else:",
        f"    {loop}",
    ]
