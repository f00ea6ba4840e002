"""Rows read once however long: the chunks of a row wait for each other in one launch.

A row too long for one program's registers (a softmax row of 393216 floats, an instance-norm
plane of 262144) otherwise costs a read per pass. Here every program of one launch holds one
chunk of a row in registers, stores its partials (the accumulators of
:mod:`htam.offline.backends.triton.split`), waits until every chunk of its row has stored
them (a spin on the row's counter), combines them in a fixed order, and so on for each pass;
it then writes its chunk of the output from registers. Input read once, output written once.

The wait needs every chunk of a row resident at once. Programs take a ticket in the order
they start, and the ticket, not the program id, names the row and the chunk: every earlier
ticket has started, so the only row that can be waiting on programs not yet started is the
oldest unfinished one, and since a row has at most one chunk per SM its chunks always fit
(longer rows take the split kernels). The forward takes this path on a GPU only: the
interpreter runs programs one after another, so a wait there would never end
(tests/offline/test_rows_coop.py checks the kernel on the CPU with its waits satisfied
beforehand).

Two kernels (``MODES``). A row cut into whole chunks (softmax's 393216 floats, 48 chunks of
8192) takes ``htam_row_coop_full``: nothing masked. Masks kept in registers through the waits
cost registers, and a program's registers decide how many an SM holds (ptxas for sm_90: 128 a
thread against 140 for softmax's chunk of 8192 on 4 warps, 128 against 246 for layer norm's).
Other rows take ``htam_row_coop_plain``, masked, its registers capped at 128 so that an SM
holds 4 programs (L1Norm's would take 143: 3). A chunk holds 8192 elements on 4 warps, 64 a
thread, whatever the block and warps of the other kernels (16384 on 4 warps, 128 a thread, was
slower); 16384 on 8 warps where that gives a row at most one chunk per SM. A layer norm's
weight and bias are loaded after the last wait.

A softmax waits once, not twice: each chunk stores its max ``m`` and ``sum(exp(x - m))``,
keeps ``exp(x - m)`` in the registers that held ``x``, and after the wait rescales it by
``exp(m - M) / S`` for the row's max ``M`` and sum ``S`` (one exp an element). Means and
variances keep two waits (a one-wait Chan merge measured 7x slower on instance norm, run 43,
unexplained).

Measured on the H200 (docs/results-h200.md, runs 19-22, 28, 39-41 and 43): the unmasked kernel
took softmax from 66% of memory speed of light to 75% and instance norm from 77% to 80% (run
41); the single wait took softmax from 75% to 88% and log-softmax from 74% to 88%; the masked
kernel on rows of 65535 (8 chunks, loads of one float) was faster than a kernel shifting the
chunks to 16-byte boundaries for vector loads (9 chunks, 230 registers: L1Norm 85% against 80%,
L2Norm 83% against 80%, run 43), and capping its registers took L1Norm from 82% to 87% and
L2Norm from 79% to 87% (run 45; log-softmax's masked kernel spills 192 bytes under the cap,
not measured). Polling the counter with a plain or acquire load instead of
the atomic was slower (61% against 75% for softmax). Dropped earlier (runs 40-41): every pass
reading a row's cut chunks again in masked tiles, and a layer-norm row of 4.2 M floats (512
chunks) held by capping registers at 128 so that 4 programs fit an SM (39% against 45% for the
split kernels).
"""

from __future__ import annotations

from dataclasses import replace

from htam.offline.backends.triton import reduce as red
from htam.offline.backends.triton.split import SplitKernels, partial_states

CHUNK, WARPS = 8192, 4  # a chunk's elements and warps: 64 elements a thread
MODES = ("full", "plain")  # the kernels: see CoopKernels.kernel
CHUNKS = (CHUNK, 2 * CHUNK)  # the chunk sizes tried, smallest first (warps grow with them)
MASKED_REGS = 128  # the masked kernel's registers a thread, capped


class CoopKernels(SplitKernels):
    """The single-read kernel and its launch, for a RowKernel built with :meth:`params`."""

    @staticmethod
    def applies(kernel) -> bool:
        """The register row cache, and an elementwise output after at least one reduction."""
        return kernel.p.cache and kernel.ir.out_kind == "elem" and bool(kernel.sched.passes)

    @staticmethod
    def params(p):
        """The parameters the kernel is built with: per-lane partials and Welford off, the
        online softmax on (one wait instead of two; see the module docstring)."""
        return replace(p, lanes=False, online=True, welford=False)

    def _reduce(self, r, masked: bool) -> tuple[list[str], dict[int, str]]:
        """A chunk's partials of ``r``, and the element values they leave in registers: an
        online softmax keeps ``exp(a - m)`` of its chunk, which after the wait only needs
        rescaling by ``exp(m - M)`` (the row's max ``M``) instead of a second exp."""
        k, x = self.k, self.k.tp.ref(r.arg, True)
        if r.kind != "online":
            return red.init(r, False) + red.update(r, x, masked, False, k.m), {}
        i, total = r.ops
        xv = f"tl.where(cmask, {x}, {red.NEG})" if masked else x
        kept = k.ir.prog.ops[total].args[0]  # the exp the sum reduces
        return [
            f"ml{i} = tl.maximum(tl.max({xv}, axis=1), -1e30)",
            f"m{i} = ml{i}",
            f"ex{i} = {k.m.exp(f'{xv} - ml{i}[:, None]')}",
            f"s{i} = tl.sum(ex{i}, axis=1)",
        ], {kept: f"v{kept} = ex{i} * {k.m.exp(f'ml{i} - r{i}')}[:, None]"}

    def _wait(self, p, n: int) -> list[str]:
        """Pass ``n``'s partials stored, the wait for the row's other chunks, their combine."""
        lines = []
        for r in p.reds:
            lines += [
                f"tl.store({self._slot(v)} + t % SPLIT, {v})" for v, _, _ in partial_states(r)
            ]
        return lines + [
            "tl.debug_barrier()",  # every thread's partials stored before the release
            "seen = tl.atomic_add(sync_ptr + 1 + row, 1) + 1",
            f"while seen < SPLIT * {n + 1}:",
            "    seen = tl.atomic_add(sync_ptr + 1 + row, 0)",
            "tl.debug_barrier()",
            *self._combine(p, l2=True),
        ]

    def kernel(self, name: str, masked: bool) -> str:
        """The kernel for rows cut into whole chunks (nothing masked) or for other rows."""
        k, out = self.k, self.k.ir.prog.out
        lines = [
            "t = tl.atomic_add(sync_ptr, 1)",  # the ticket: the order programs started in
            "row = t // SPLIT",
            "rows = row + tl.arange(0, ROWS)",
            "rbase = row.to(tl.int64) * R",
            "c0 = (t % SPLIT) * BLOCK",
            "cols = c0 + tl.arange(0, BLOCK)",
            "flat = rbase + cols[None, :]",
        ]
        if masked:
            lines.append("cmask = cols[None, :] < R")
        lines += [
            "sj = tl.arange(0, SPLITP)[None, :]",
            *k.tp.scalar_loads(),
            *(k.tp.stmt(i) for i in k.sched.before),
        ]
        # the passes' operands first; the rest (a layer norm's weight and bias) after the last
        # wait, so that they take no registers while the chunk waits
        early = [i for p in k.sched.passes for i in p.elems]
        reds = [r.arg for p in k.sched.passes for r in p.reds]
        lines += k._loads(early, masked, reds)
        done: list[int] = []  # element values stay in registers from the pass that made them
        kept: dict[int, str] = {}  # element ops a pass left in registers, and their rescale
        for n, p in enumerate(k.sched.passes):
            lines += [k.tp.stmt(i) for i in p.elems if i not in done]
            done += p.elems
            for r in p.reds:
                body, more = self._reduce(r, masked)
                lines += body
                kept.update(more)
            lines += self._wait(p, n)
        rest = [i for i in k.sched.final if i not in done]
        lines += k._loads(rest, masked, [out], loaded=k.tp.used_operands(early, reds))
        lines += [kept.get(i) or k.tp.stmt(i) for i in rest]
        mask = ", mask=cmask" if masked else ""
        lines.append(f"tl.store(out_ptr + flat, {k.tp.ref(out, True)}{mask})")
        return self._signature(name, sync=True) + "\n" + "\n".join("    " + s for s in lines)

    def kernels(self) -> list[str]:
        return [self.kernel(f"htam_row_coop_{m}", m == "plain") for m in MODES]

    def launch_lines(self, args_head: list[str], fits: str) -> list[str]:
        """Forward lines taking this path where it applies (then returning ``out``): on a GPU,
        the last dims reduced (``inner == 1``), a row that does not ``fit`` one program's
        register tile, and no more chunks than the SMs hold at once."""
        t = f"t_{self.k.ir.primary}"
        args = ", ".join([*args_head, "part", "ipart", "sync", "n_rows", "R", "inner", "float(R)"])
        dev = f"{t}.device"
        return [
            f"if {t}.is_cuda and inner == 1 and not ({fits}):",
            f"    sms = torch.cuda.get_device_properties({dev}).multi_processor_count",
            f"    cbs = [c for c in {CHUNKS} if triton.cdiv(R, c) <= sms]",
            "    if cbs:",
            "        cb = cbs[0]",
            "        csplit = triton.cdiv(R, cb)",
            *("        " + s for s in self._partials("csplit")),
            f"        sync = torch.zeros(n_rows + 1, dtype=torch.int32, device={dev})",
            # whole chunks: nothing masked, fewer registers, more programs a SM; the masked
            # kernel's registers capped (L1Norm's 143 would let an SM hold 3 programs, not 4)
            "        coop, regs = ((htam_row_coop_full, {}) if R % cb == 0 else "
            f"(htam_row_coop_plain, {{'maxnreg': {MASKED_REGS}}}))",
            f"        coop[(n_rows * csplit,)]({args}, csplit, cb, ROWS=1, "
            "SPLITP=triton.next_power_of_2(csplit), BLOCK=cb, "
            f"num_warps=cb // {CHUNK // WARPS}, **regs)",
            "        return out",
        ]
