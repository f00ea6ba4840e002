"""Layer norm with the row held on chip: the solution files of run 56 (docs/results-h200.md).

KernelBench L1 40_LayerNorm normalizes rows of 4.19 M floats (16.8 MB). These variants hold a
row across the GPU, one chunk per program, and wait for the row's statistics (one or two grid
waits per row: tickets, or a persistent program per chunk; 32768 floats on 16 warps or 16384 on
8; eviction hints keeping the weight and bias in L2). Each file defines ModelNew; compare them
with ``python3 scripts/experiments/gpu_variants.py OUT.jsonl SECONDS 'level1/40_*' '' file:DIR/ln_a_two_waits.py ...``.
On the H200 the best took 46% of memory speed of light against 54% for the split kernels; run
60's variants (h-m) prefetch the next row into L2 while a row waits, or leave the waits out.

    python3 scripts/experiments/probe_layernorm_coop.py DIR
"""

import sys
from pathlib import Path

HEAD = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _wait(sync_ptr, idx, target):
    tl.debug_barrier()
    seen = tl.atomic_add(sync_ptr + idx, 1) + 1
    while seen < target:
        seen = tl.atomic_add(sync_ptr + idx, 0)
    tl.debug_barrier()


@triton.jit
def _ld(p, HINT: tl.constexpr):
    if HINT == 1:
        return tl.load(p, eviction_policy="evict_first")
    elif HINT == 2:
        return tl.load(p, eviction_policy="evict_last")
    else:
        return tl.load(p)


@triton.jit
def _prefetch(x_ptr, row, c, R, n_rows, sync_ptr, eps, BLOCK: tl.constexpr, PF: tl.constexpr,
              NPF: tl.constexpr):
    # the next row's chunk, from HBM into L2 while this row waits (PF 1, 2: bulk; 3: by line)
    if row + 1 < n_rows:
        p = x_ptr + (tl.cast(row, tl.int64) + 1) * R + c * BLOCK + tl.arange(0, NPF) * (BLOCK // NPF)
        if PF == 3:
            r = tl.inline_asm_elementwise("prefetch.global.L2::evict_last [$1]; mov.u32 $0, 0;",
                                          "=r,l", [p], dtype=tl.int32, is_pure=False, pack=1)
        else:
            r = tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], {pf_bytes}; mov.u32 $0, 0;",
                                          "=r,l", [p], dtype=tl.int32, is_pure=False, pack=1)
        if eps < 0:
            tl.store(sync_ptr, tl.sum(r, 0))


@triton.jit
def _body(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, sync_ptr, row, c, R, nchunk, eps,
          BLOCK: tl.constexpr, NCP: tl.constexpr, ONEWAIT: tl.constexpr, HINT: tl.constexpr,
          PARTS: tl.constexpr, n_rows, PF: tl.constexpr, NPF: tl.constexpr,
          NOWAIT: tl.constexpr):
    SUB: tl.constexpr = BLOCK // PARTS
    base = tl.cast(row, tl.int64) * R
    if PF == 2:
        _prefetch(x_ptr, row, c, R, n_rows, sync_ptr, eps, BLOCK, PF, NPF)
    j = tl.arange(0, NCP)
    jm = j < nchunk
    slot = part_ptr + tl.cast(row, tl.int64) * (3 * NCP)
    if PARTS == 1:
        cols = c * BLOCK + tl.arange(0, BLOCK)
        x = _ld(x_ptr + base + cols, HINT)
        if ONEWAIT:
            lm = tl.sum(x, 0) / BLOCK
            d = x - lm
            tl.store(slot + c, lm)
            tl.store(slot + NCP + c, tl.sum(d * d, 0))
            if PF == 1 or PF == 3:
                _prefetch(x_ptr, row, c, R, n_rows, sync_ptr, eps, BLOCK, PF, NPF)
            if not NOWAIT:
                _wait(sync_ptr, 1 + row, nchunk)
            pm = tl.load(slot + j, mask=jm, other=0.0, cache_modifier=".cg")
            pq = tl.load(slot + NCP + j, mask=jm, other=0.0, cache_modifier=".cg")
            mean = tl.sum(pm, 0) / nchunk
            dm = tl.where(jm, pm - mean, 0.0)
            var = (tl.sum(pq, 0) + BLOCK * tl.sum(dm * dm, 0)) / R
            d = d + (lm - mean)
        else:
            tl.store(slot + c, tl.sum(x, 0))
            _wait(sync_ptr, 1 + row, nchunk)
            pm = tl.load(slot + j, mask=jm, other=0.0, cache_modifier=".cg")
            mean = tl.sum(pm, 0) / R
            d = x - mean
            tl.store(slot + NCP + c, tl.sum(d * d, 0))
            _wait(sync_ptr, 1 + row, 2 * nchunk)
            pq = tl.load(slot + NCP + j, mask=jm, other=0.0, cache_modifier=".cg")
            var = tl.sum(pq, 0) / R
        rstd = 1.0 / tl.sqrt(var + eps)
        w = _ld(w_ptr + cols, 2 if HINT else 0)
        b = _ld(b_ptr + cols, 2 if HINT else 0)
        y = d * rstd * w + b
        if HINT:
            tl.store(y_ptr + base + cols, y, eviction_policy="evict_first")
        else:
            tl.store(y_ptr + base + cols, y)
    else:
        c0 = c * BLOCK + tl.arange(0, SUB)
        x0 = _ld(x_ptr + base + c0, HINT)
        x1 = _ld(x_ptr + base + c0 + SUB, HINT)
        x2 = _ld(x_ptr + base + c0 + 2 * SUB, HINT)
        x3 = _ld(x_ptr + base + c0 + 3 * SUB, HINT)
        lm = (tl.sum(x0, 0) + tl.sum(x1, 0) + tl.sum(x2, 0) + tl.sum(x3, 0)) / BLOCK
        x0 = x0 - lm
        x1 = x1 - lm
        x2 = x2 - lm
        x3 = x3 - lm
        tl.store(slot + c, lm)
        tl.store(slot + NCP + c, tl.sum(x0 * x0, 0) + tl.sum(x1 * x1, 0) + tl.sum(x2 * x2, 0) + tl.sum(x3 * x3, 0))
        _wait(sync_ptr, 1 + row, nchunk)
        pm = tl.load(slot + j, mask=jm, other=0.0, cache_modifier=".cg")
        pq = tl.load(slot + NCP + j, mask=jm, other=0.0, cache_modifier=".cg")
        mean = tl.sum(pm, 0) / nchunk
        dm = tl.where(jm, pm - mean, 0.0)
        var = (tl.sum(pq, 0) + BLOCK * tl.sum(dm * dm, 0)) / R
        rstd = 1.0 / tl.sqrt(var + eps)
        sh = lm - mean
        yb = y_ptr + base + c0
        tl.store(yb, (x0 + sh) * rstd * _ld(w_ptr + c0, 2) + _ld(b_ptr + c0, 2), eviction_policy="evict_first")
        tl.store(yb + SUB, (x1 + sh) * rstd * _ld(w_ptr + c0 + SUB, 2) + _ld(b_ptr + c0 + SUB, 2), eviction_policy="evict_first")
        tl.store(yb + 2 * SUB, (x2 + sh) * rstd * _ld(w_ptr + c0 + 2 * SUB, 2) + _ld(b_ptr + c0 + 2 * SUB, 2), eviction_policy="evict_first")
        tl.store(yb + 3 * SUB, (x3 + sh) * rstd * _ld(w_ptr + c0 + 3 * SUB, 2) + _ld(b_ptr + c0 + 3 * SUB, 2), eviction_policy="evict_first")


@triton.jit
def htam_ln_ticket(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, sync_ptr, R, nchunk, eps, n_rows,
                   BLOCK: tl.constexpr, NCP: tl.constexpr, ONEWAIT: tl.constexpr,
                   HINT: tl.constexpr, PARTS: tl.constexpr, PF: tl.constexpr,
                   NPF: tl.constexpr, NOWAIT: tl.constexpr):
    t = tl.atomic_add(sync_ptr, 1)
    _body(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, sync_ptr, t // nchunk, t % nchunk, R, nchunk,
          eps, BLOCK, NCP, ONEWAIT, HINT, PARTS, n_rows, PF, NPF, NOWAIT)


@triton.jit
def htam_ln_persist(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, sync_ptr, R, nchunk, eps, n_rows,
                    BLOCK: tl.constexpr, NCP: tl.constexpr, ONEWAIT: tl.constexpr,
                    HINT: tl.constexpr, PARTS: tl.constexpr, PF: tl.constexpr,
                    NPF: tl.constexpr, NOWAIT: tl.constexpr):
    c = tl.program_id(0)
    for row in range(n_rows):
        _body(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, sync_ptr, row, c, R, nchunk,
              eps, BLOCK, NCP, ONEWAIT, HINT, PARTS, n_rows, PF, NPF, NOWAIT)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        R = self.ln.weight.numel()
        xs = x.contiguous()
        n_rows = xs.numel() // R
        out = torch.empty_like(xs)
        BLOCK, WARPS = {block}, {warps}
        nchunk = R // BLOCK
        assert R % BLOCK == 0 and nchunk <= torch.cuda.get_device_properties(x.device).multi_processor_count * {per_sm}
        NCP = triton.next_power_of_2(nchunk)
        part = torch.empty(n_rows * 3 * NCP, device=x.device, dtype=torch.float32)
        sync = torch.zeros(n_rows + 1, dtype=torch.int32, device=x.device)
        if {persist}:
            htam_ln_persist[(nchunk,)](xs, self.ln.weight, self.ln.bias, out, part, sync, R, nchunk,
                self.ln.eps, n_rows, BLOCK=BLOCK, NCP=NCP, ONEWAIT={onewait}, HINT={hint}, PARTS={parts}, PF={pf}, NPF={npf}, NOWAIT={nowait}, num_warps=WARPS)
        else:
            htam_ln_ticket[(n_rows * nchunk,)](xs, self.ln.weight, self.ln.bias, out, part, sync, R, nchunk,
                self.ln.eps, n_rows, BLOCK=BLOCK, NCP=NCP, ONEWAIT={onewait}, HINT={hint}, PARTS={parts}, PF={pf}, NPF={npf}, NOWAIT={nowait}, num_warps=WARPS)
        return out.view_as(x)
'''

VARIANTS = {
    "a_two_waits": dict(block=32768, warps=16, per_sm=1, persist=False, onewait=False, hint=0, parts=1),
    "b_one_wait": dict(block=32768, warps=16, per_sm=1, persist=False, onewait=True, hint=0, parts=1),
    "c_one_wait_hints": dict(block=32768, warps=16, per_sm=1, persist=False, onewait=True, hint=1, parts=1),
    "d_persist_hints": dict(block=32768, warps=16, per_sm=1, persist=True, onewait=True, hint=1, parts=1),
    "e_parts_hints": dict(block=32768, warps=16, per_sm=1, persist=False, onewait=True, hint=1, parts=4),
    "f_persist_parts": dict(block=32768, warps=16, per_sm=1, persist=True, onewait=True, hint=1, parts=4),
    "g_16k_8w_hints": dict(block=16384, warps=8, per_sm=2, persist=False, onewait=True, hint=1, parts=1),
}
# Run 60: the next row's chunk prefetched into L2 while a row waits (bulk, 256 bytes a thread,
# after the partials or at the row's start; or a prefetch by 128-byte line), and the waits
# left out (a wrong answer: what the wait costs).
D = VARIANTS["d_persist_hints"]
G = VARIANTS["g_16k_8w_hints"]
VARIANTS.update({
    "h_persist_pf_after": dict(D, pf=1),
    "i_persist_pf_start": dict(D, pf=2),
    "j_persist_pf_lines": dict(D, pf=3),
    "k_persist_nowait": dict(D, nowait=1),
    "l_persist_nowait_pf": dict(D, pf=1, nowait=1),
    "m_16k_8w_pf_after": dict(G, pf=1),
})


def source(v: dict) -> str:
    v = dict(dict(pf=0, nowait=0), **v)
    threads = 32 * v["warps"]
    lines = v["block"] * 4 // 128
    v["npf"] = lines if v["pf"] == 3 else threads
    v["pf_bytes"] = v["block"] * 4 // threads
    return HEAD.format(**v)


if __name__ == "__main__":
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for name, v in VARIANTS.items():
        (out / f"ln_{name}.py").write_text(source(v))
