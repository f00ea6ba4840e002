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
oldest unfinished one, and since a row has at most one chunk per SM its chunks always fit. The
forward takes this path on a GPU only: the interpreter runs programs one after another, so a
wait there would never end (tests/offline/test_rows_coop.py checks the kernel on the CPU with
its waits satisfied beforehand).

A row whose length is a multiple of 4 floats starts on a 16-byte boundary, and its chunks are
vector loads as they are. Otherwise (a row of 65535 floats starts anywhere) the chunks of the
second kernel, ``htam_row_coop_shift``, start at 16-byte boundaries of the tensor rather than of
the row, so that a chunk inside its row is read and written with vectors and no mask; only a
row's first and last chunks are masked. The plain pass schedule is used (the data is in
registers, so a pass costs no read). A chunk holds 8192 elements on 4 warps, 64 a thread
whatever the block and warps of the other kernels (a chunk of 16384 on 4 warps, 128 a thread,
was slower); it is doubled, with its warps, up to 16384 until a row has at most one chunk per SM.

Measured on the H200 (docs/results-h200.md, runs 19-22 and 28): on rows of 65535 the shifted
kernel was 1.2-1.4x the unshifted one; on rows of 393216 or 262144 the shifted kernel ran at 0.6x
the unshifted one, and the online softmax and Welford schedules made the kernel slower. Chunks
of 8192 on 4 warps reached 79-80% of speed of light on L1Norm and L2Norm (68% with the earlier
default there, 4096 on 4 warps) and 77% on InstanceNorm (75% with the earlier 8192 on 8 warps);
softmax 66% (68%).
"""

from __future__ import annotations

from dataclasses import replace

from htam.offline.backends.triton import reduce as red
from htam.offline.backends.triton.split import SplitKernels, partial_states

ALIGN = 4  # floats in 16 bytes
CHUNK, WARPS = 8192, 4  # a chunk's elements and warps: 64 elements a thread
MAX_CHUNK = 16384


class CoopKernels(SplitKernels):
    """The single-read kernel and its launch, for a RowKernel built with the plain schedule."""

    @staticmethod
    def applies(kernel) -> bool:
        """The register row cache, and an elementwise output after at least one reduction."""
        return kernel.p.cache and kernel.ir.out_kind == "elem" and bool(kernel.sched.passes)

    @staticmethod
    def params(p):
        """The parameters the kernel is built with: per-lane partials and one-pass rewrites off
        (on the H200 the online softmax and Welford variants of this kernel were slower)."""
        return replace(p, lanes=False, online=False, welford=False)

    def _edge(self, body, shift: bool) -> list[str]:
        """``body(masked)``; with ``shift``, unmasked for a chunk inside its row."""
        if not shift:
            return body(True)
        return [
            "if (c0 >= 0) & (c0 + BLOCK <= R):",
            *("    " + s for s in body(False)),
            "else:",
            *("    " + s for s in body(True)),
        ]

    def kernel(self, name: str, shift: bool) -> str:
        k = self.k
        out = k.ir.prog.out
        lines = [
            "t = tl.atomic_add(sync_ptr, 1)",  # the ticket: the order programs started in
            "row = t // SPLIT",
            "rows = row + tl.arange(0, ROWS)",
            "rbase = row.to(tl.int64) * R",
        ]
        if shift:
            lines += [
                f"c0 = (t % SPLIT) * BLOCK - (rbase % {ALIGN}).to(tl.int32)",
                "cols = c0 + tl.arange(0, BLOCK)",
                "cmask = (cols[None, :] >= 0) & (cols[None, :] < R)",
                f"flat = tl.multiple_of(rbase + c0, {ALIGN}) + tl.arange(0, BLOCK)[None, :]",
            ]
        else:
            lines += [
                "cols = (t % SPLIT) * BLOCK + tl.arange(0, BLOCK)",
                "cmask = cols[None, :] < R",
                "flat = rbase + cols[None, :]",
            ]
        lines += [
            "sj = tl.arange(0, SPLITP)[None, :]",
            *k.tp.scalar_loads(),
            *(k.tp.stmt(i) for i in k.sched.before),
        ]
        every = list(range(len(k.ir.prog.ops)))
        colmask = "(cols >= 0) & (cols < R)" if shift else "cols < R"
        lines += self._edge(lambda masked: k._loads(every, masked, [out], colmask), shift)
        done: list[int] = []  # element values stay in registers from the pass that made them
        for n, p in enumerate(k.sched.passes):
            lines += [k.tp.stmt(i) for i in p.elems if i not in done]
            done += p.elems
            for r in p.reds:
                lines += red.init(r, False)
                lines += red.update(r, k.tp.ref(r.arg, True), True, False, k.m)
                lines += [
                    f"tl.store({self._slot(v)} + t % SPLIT, {v})" for v, _, _ in partial_states(r)
                ]
            counter = "sync_ptr + 1 + row"
            lines += [
                "tl.debug_barrier()",  # every thread's partials stored before the release
                f"seen = tl.atomic_add({counter}, 1) + 1",
                f"while seen < SPLIT * {n + 1}:",
                f"    seen = tl.atomic_add({counter}, 0)",
                "tl.debug_barrier()",
                *self._combine(p, l2=True),
            ]
        lines += [k.tp.stmt(i) for i in k.sched.final if i not in done]
        value = k.tp.ref(out, True)
        store = f"tl.store(out_ptr + flat, {value}"
        lines += self._edge(lambda masked: [store + (", mask=cmask)" if masked else ")")], shift)
        return self._signature(name, sync=True) + "\n" + "\n".join("    " + s for s in lines)

    def kernels(self) -> list[str]:
        return [self.kernel("htam_row_coop", False), self.kernel("htam_row_coop_shift", True)]

    def launch_lines(self, args_head: list[str], fits: str) -> list[str]:
        """Forward lines taking this path where it applies (then returning ``out``): on a GPU,
        the last dims reduced (``inner == 1``), a row that does not ``fit`` one program's
        register tile, and at most one chunk per SM."""
        t = f"t_{self.k.ir.primary}"
        args = ", ".join([*args_head, "part", "ipart", "sync", "n_rows", "R", "inner", "float(R)"])

        return [
            f"if {t}.is_cuda and inner == 1 and not ({fits}):",
            f"    sms = torch.cuda.get_device_properties({t}.device).multi_processor_count",
            f"    span = R if R % {ALIGN} == 0 else R + {ALIGN - 1}  # the shifted chunks' reach",
            f"    cb = {CHUNK}",
            f"    while triton.cdiv(span, cb) > sms and cb < {MAX_CHUNK}:",
            "        cb *= 2",
            "    csplit = triton.cdiv(span, cb)",
            "    if csplit <= sms:",
            *("        " + s for s in self._partials("csplit")),
            f"        sync = torch.zeros(n_rows + 1, dtype=torch.int32, device={t}.device)",
            f"        coop = htam_row_coop if R % {ALIGN} == 0 else htam_row_coop_shift",
            f"        coop[(n_rows * csplit,)]({args}, csplit, cb, ROWS=1, "
            "SPLITP=triton.next_power_of_2(csplit), BLOCK=cb, "
            f"num_warps=cb // {CHUNK // WARPS})",
            "        return out",
        ]
