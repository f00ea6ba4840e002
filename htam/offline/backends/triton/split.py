"""Split rows: a row too long for one program is cut into chunks reduced by many programs.

With few rows (a loss reduced to one scalar, 16 layer-norm rows of 4 M elements) one program per
row leaves most of the GPU idle. Here each pass of the row schedule is one launch over a
``(n_rows, split)`` grid: every program folds its chunk of ``CHUNK`` columns (a multiple of
``BLOCK``) into the pass's accumulators and stores them as partials; the next launch starts by
loading the ``split`` partials of its row and combining them (the same cross-lane combine as the
warp-shuffle strategy: sums, maxima, (value, index) pairs, online (max, sum) pairs and Welford
(count, mean, M2) triples), in a fixed order, so the result is deterministic. The last launch
writes the output: each chunk's elements for an elementwise output, or one value per row.

The forward chooses at run time, from the shape, whether to split and into how many chunks
(:func:`split_lines`), so one file serves the small and the large size. With the register row
cache, a GPU reads a long row once instead (:mod:`htam.offline.backends.triton.coop`).
"""

from __future__ import annotations

from htam.offline.backends.triton import reduce as red
from htam.offline.backends.triton.common import operand_params
from htam.offline.ir.passes import Red

# Programs the split launch aims for (an H200 has 132 SMs: about 16 programs per SM) and the
# fewest elements a chunk should hold (below that the extra launch costs more than it gains).
TARGET_PROGRAMS = 2048
MIN_CHUNK_TILES = 4
SPLIT_BELOW_ROWS = 1024  # with this many rows or more, one program per row fills the GPU


def partial_states(r: Red) -> list[tuple[str, str, str]]:
    """(variable, identity for padding, "f" or "i" buffer) of the accumulators of ``r``."""
    i = r.ops[0]
    if r.kind == "rsum":
        return [(f"a{i}", "0.0", "f")]
    if r.kind in ("rmax", "rmin"):
        return [(f"a{i}", red.NEG if r.kind == "rmax" else red.POS, "f")]
    if r.kind in ("rargmax", "rargmin"):
        return [(f"a{i}", red.NEG if r.kind == "rargmax" else red.POS, "f"), (f"ai{i}", "0", "i")]
    if r.kind == "online":
        return [(f"m{i}", "-1e30", "f"), (f"s{i}", "0.0", "f")]
    return [(f"wn{i}", "0.0", "f"), (f"wm{i}", "0.0", "f"), (f"wq{i}", "0.0", "f")]


class SplitKernels:
    """The launches of the split path of a :class:`htam.offline.backends.triton.row.RowKernel`."""

    def __init__(self, kernel):
        self.k = kernel  # a RowKernel built with lanes and coalescing off
        self.slots: dict[str, tuple[str, int]] = {}
        counts = {"f": 0, "i": 0}
        for p in kernel.sched.passes:
            for r in p.reds:
                for var, _, buf in partial_states(r):
                    self.slots[var] = (buf, counts[buf])
                    counts[buf] += 1
        self.n_float, self.n_int = counts["f"], counts["i"]

    # -- pieces ---------------------------------------------------------------------------
    def _prologue(self) -> list[str]:
        k = self.k
        lines = [
            "rows = tl.program_id(0) + tl.arange(0, ROWS)",
            "rmask = rows < n_rows",
            "base = (rows // INNER) * (R * INNER) + rows % INNER",
            "sj = tl.arange(0, SPLITP)[None, :]",
        ]
        lines += k.tp.scalar_loads()
        return lines + [k.tp.stmt(i) for i in k.sched.before]

    def _slot(self, var: str) -> str:
        buf, n = self.slots[var]
        return f"{'part' if buf == 'f' else 'ipart'}_ptr + ({n} * n_rows + rows) * SPLIT"

    def _combine(self, p, l2: bool = False) -> list[str]:
        """Row values of pass ``p`` from the partials of every chunk (``l2``: read past the SM's
        L1, which may hold a line of partials from before they were all stored)."""
        lines = []
        hint = ', cache_modifier=".cg"' if l2 else ""
        for r in p.reds:
            for var, ident, _ in partial_states(r):
                ptr = f"({self._slot(var)})[:, None] + sj"
                lines.append(f"{var} = tl.load({ptr}, mask=sj < SPLIT, other={ident}{hint})")
            lines += red.finish(r, True, self.k.m)
        return lines + [self.k.tp.stmt(i) for i in p.after]

    def _chunk_loop(self, body) -> list[str]:
        lines = ["c_lo = tl.program_id(1) * CHUNK", "c_hi = tl.minimum(c_lo + CHUNK, R)"]
        cols = self.k._cols
        if not self.k.p.split_tail:
            return lines + [
                "for c0 in range(c_lo, c_hi, BLOCK):",
                *("    " + s for s in cols("c0") + body(True)),
            ]
        return lines + [
            "c_mid = tl.minimum(c_hi, R - R % BLOCK)",
            "for c0 in range(c_lo, c_mid, BLOCK):",
            *("    " + s for s in cols("c0") + body(False)),
            "for c0 in range(tl.maximum(c_lo, c_mid), c_hi, BLOCK):",
            *("    " + s for s in cols("c0") + body(True)),
        ]

    def _signature(self, name: str, sync: bool = False) -> str:
        k = self.k
        params = [
            "out_ptr",
            *operand_params(k.ir.operands),
            "part_ptr",
            "ipart_ptr",
            *(["sync_ptr"] if sync else []),
            "n_rows",
            "R",
            "INNER",
            "R_f",
            "SPLIT",
            "CHUNK",
            "ROWS: tl.constexpr",
            "SPLITP: tl.constexpr",
            "BLOCK: tl.constexpr",
        ]
        return f"@triton.jit\ndef {name}({', '.join(params)}):"

    # -- kernels --------------------------------------------------------------------------
    def pass_kernel(self, n: int, name: str) -> str:
        """Launch ``n``: combine the earlier passes, fold this chunk, store its partials."""
        k = self.k
        passes = k.sched.passes
        lines = self._prologue()
        for p in passes[:n]:
            lines += self._combine(p)
        p = passes[n]
        for r in p.reds:
            lines += red.init(r, False)
        lines += self._chunk_loop(lambda masked: k._pass_body(p, masked))
        for r in p.reds:
            for var, _, _ in partial_states(r):
                lines.append(f"tl.store({self._slot(var)} + tl.program_id(1), {var})")
        return self._signature(name) + "\n" + "\n".join("    " + s for s in lines)

    def final_kernel(self, name: str) -> str:
        """The output: this chunk's elements, or (grid ``(n_rows, 1)``) the row's value."""
        k = self.k
        lines = self._prologue()
        for p in k.sched.passes:
            lines += self._combine(p)
        if k.ir.out_kind == "elem":
            lines += self._chunk_loop(k._store_body)
        else:
            lines += k._store_rows()
        return self._signature(name) + "\n" + "\n".join("    " + s for s in lines)

    def kernels(self) -> list[str]:
        out = [self.pass_kernel(n, f"htam_split_pass{n}") for n in range(len(self.k.sched.passes))]
        return out + [self.final_kernel("htam_split_out")]

    def _partials(self, split: str) -> list[str]:
        dev = f"t_{self.k.ir.primary}.device"
        return [
            f"part = torch.empty(({max(1, self.n_float)}, n_rows, {split}), "
            f"dtype=torch.float32, device={dev})",
            f"ipart = torch.empty(({max(1, self.n_int)}, n_rows, {split}), "
            f"dtype=torch.int32, device={dev})",
        ]

    def launch_lines(self, args_head: list[str], warps: str) -> list[str]:
        """Forward lines of the split path (``split``, ``chunk`` and ``block`` already set)."""
        ir = self.k.ir
        args = ", ".join([*args_head, "part", "ipart", "n_rows", "R", "inner", "float(R)"])
        args += ", split, chunk, ROWS=1, SPLITP=triton.next_power_of_2(split), BLOCK=block"
        lines = self._partials("split")
        for n in range(len(self.k.sched.passes)):
            lines.append(f"htam_split_pass{n}[(n_rows, split)]({args}, num_warps={warps})")
        grid = "(n_rows, split)" if ir.out_kind == "elem" else "(n_rows, 1)"
        return lines + [f"htam_split_out[{grid}]({args}, num_warps={warps})"]


def split_lines() -> list[str]:
    """Forward lines choosing ``split`` (chunks per row, 1 for no split) and ``chunk``."""
    return [
        "split = 1",
        f"if n_rows < {SPLIT_BELOW_ROWS}:",
        f"    split = max(1, min(triton.cdiv(R, {MIN_CHUNK_TILES} * block), "
        f"triton.cdiv({TARGET_PROGRAMS}, n_rows)))",
        "chunk = triton.cdiv(triton.cdiv(R, split), block) * block",
        "split = triton.cdiv(R, chunk)",
    ]
