"""The Triton primitives a whole model's rewritten modules call (see :mod:`.runtime`).

Each primitive is one kernel launch (the batch-norm moments one, plus a sum of its per-chunk
partials); ``{block}`` and ``{warps}`` are the template's parameters. The functions keep the
signatures :mod:`.runtime` calls: ``_act``, ``_affine_act``, ``_bias_act``, ``_bn_train``,
``_rows``; the recurrent cells are :mod:`.triton_cells`.
"""

IMPORTS = """import math

import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl
"""

PRIMITIVES = '''
_BLOCK = {block}
_WARPS = {warps}


@triton.jit
def _act_fn(v, KIND: tl.constexpr, lo, hi):
    if KIND == 1:
        v = tl.maximum(v, 0.0)
    elif KIND == 2:
        v = 1.0 / (1.0 + tl.exp(-v))
    elif KIND == 3:
        v = 2.0 / (1.0 + tl.exp(-2.0 * v)) - 1.0
    elif KIND == 4:
        v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    elif KIND == 5:
        u = 0.7978845608028654 * (v + 0.044715 * v * v * v)
        v = 0.5 * v * (2.0 / (1.0 + tl.exp(-2.0 * u)))
    elif KIND == 6:
        v = v / (1.0 + tl.exp(-v))
    elif KIND == 7:
        v = tl.minimum(tl.maximum(v, lo), hi)
    elif KIND == 8:
        v = tl.where(v >= 0.0, v, v * lo)
    elif KIND == 9:
        v = tl.exp(v)
    return v


@triton.jit
def _act_kernel(x_ptr, y_ptr, n, lo, hi, KIND: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offs, _act_fn(v, KIND, lo, hi), mask=mask)


@triton.jit
def _channel_act_kernel(x_ptr, y_ptr, scale_ptr, shift_ptr, n, inner, C, lo, hi,
                        HAS_SCALE: tl.constexpr, KIND: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    c = (offs // inner) % C
    v = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    if HAS_SCALE:
        v = v * tl.load(scale_ptr + c, mask=mask, other=1.0)
    v = v + tl.load(shift_ptr + c, mask=mask, other=0.0)
    tl.store(y_ptr + offs, _act_fn(v, KIND, lo, hi), mask=mask)


@triton.jit
def _moments_kernel(x_ptr, part_ptr, count, inner, C, chunk, S, BLOCK: tl.constexpr):
    # sums of (x - k) and (x - k)^2 over one chunk of channel c, k its first element (a shift
    # that keeps the variance from cancelling when the mean is far from zero)
    c = tl.program_id(0)
    s = tl.program_id(1)
    k = tl.load(x_ptr + c * inner).to(tl.float32)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    start = s * chunk
    for j in range(start, start + chunk, BLOCK):
        idx = j + tl.arange(0, BLOCK)
        mask = idx < count
        idx = idx.to(tl.int64)
        addr = (idx // inner) * C * inner + c * inner + idx % inner
        v = tl.load(x_ptr + addr, mask=mask, other=0.0).to(tl.float32) - k
        v = tl.where(mask, v, 0.0)
        acc += v
        acc2 += v * v
    tl.store(part_ptr + (c * S + s) * 2, tl.sum(acc, 0))
    tl.store(part_ptr + (c * S + s) * 2 + 1, tl.sum(acc2, 0))


@triton.jit
def _bn_finalize_kernel(x_ptr, part_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, scale_ptr, shift_ptr,
                        count, inner, S, eps, momentum, HAS_W: tl.constexpr,
                        HAS_B: tl.constexpr, TRACK: tl.constexpr, BLOCK_S: tl.constexpr):
    # channel c's partial sums -> its scale and shift (and the running statistics' update)
    c = tl.program_id(0)
    s = tl.arange(0, BLOCK_S)
    m = s < S
    s1 = tl.sum(tl.load(part_ptr + (c * S + s) * 2, mask=m, other=0.0), 0)
    s2 = tl.sum(tl.load(part_ptr + (c * S + s) * 2 + 1, mask=m, other=0.0), 0)
    k = tl.load(x_ptr + c * inner).to(tl.float32)
    d = s1 / count
    var = tl.maximum(s2 / count - d * d, 0.0)
    mean = k + d
    scale = 1.0 / tl.sqrt(var + eps)
    if HAS_W:
        scale = scale * tl.load(w_ptr + c)
    shift = -mean * scale
    if HAS_B:
        shift = shift + tl.load(b_ptr + c)
    tl.store(scale_ptr + c, scale)
    tl.store(shift_ptr + c, shift)
    if TRACK:
        unbiased = var * count / tl.maximum(count - 1.0, 1.0)
        tl.store(rm_ptr + c, (1.0 - momentum) * tl.load(rm_ptr + c) + momentum * mean)
        tl.store(rv_ptr + c, (1.0 - momentum) * tl.load(rv_ptr + c) + momentum * unbiased)


@triton.jit
def _rows_kernel(x_ptr, y_ptr, w_ptr, b_ptr, cols, eps,
                 MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                 BLOCK: tl.constexpr):
    # MODE 0 softmax, 1 log-softmax, 2 layer norm: one row per program, read in tiles
    row = tl.program_id(0).to(tl.int64)
    base = row * cols
    if MODE == 2:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for j in range(0, cols, BLOCK):
            idx = j + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + base + idx, mask=idx < cols, other=0.0).to(tl.float32)
        mean = tl.sum(acc, 0) / cols
        acc2 = tl.zeros([BLOCK], dtype=tl.float32)
        for j in range(0, cols, BLOCK):
            idx = j + tl.arange(0, BLOCK)
            m = idx < cols
            d = tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32) - mean
            acc2 += tl.where(m, d * d, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(acc2, 0) / cols + eps)
        for j in range(0, cols, BLOCK):
            idx = j + tl.arange(0, BLOCK)
            m = idx < cols
            v = (tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32) - mean) * rstd
            if HAS_W:
                v = v * tl.load(w_ptr + idx, mask=m, other=1.0)
            if HAS_B:
                v = v + tl.load(b_ptr + idx, mask=m, other=0.0)
            tl.store(y_ptr + base + idx, v, mask=m)
    else:
        mx = tl.full([BLOCK], -float("inf"), dtype=tl.float32)
        for j in range(0, cols, BLOCK):
            idx = j + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + base + idx, mask=idx < cols, other=-float("inf")).to(tl.float32)
            mx = tl.maximum(mx, v)
        top = tl.max(mx, 0)
        top = tl.where(top == -float("inf"), 0.0, top)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for j in range(0, cols, BLOCK):
            idx = j + tl.arange(0, BLOCK)
            v = tl.load(x_ptr + base + idx, mask=idx < cols, other=-float("inf")).to(tl.float32)
            acc += tl.exp(v - top)
        total = tl.sum(acc, 0)
        for j in range(0, cols, BLOCK):
            idx = j + tl.arange(0, BLOCK)
            m = idx < cols
            v = tl.load(x_ptr + base + idx, mask=m, other=0.0).to(tl.float32) - top
            if MODE == 1:
                v = v - tl.log(total)
            else:
                v = tl.exp(v) / total
            tl.store(y_ptr + base + idx, v, mask=m)


def _grid(n):
    return (triton.cdiv(n, _BLOCK),)


def _act(x, spec, inplace=False):
    """The activation ``spec`` (kind, lo, hi) of ``x``; written into ``x`` when ``inplace``."""
    src = x.contiguous()
    out = src if inplace and src is x else torch.empty_like(src)
    n = src.numel()
    if n:
        _act_kernel[_grid(n)](src, out, n, float(spec[1]), float(spec[2]), KIND=spec[0],
                              BLOCK=_BLOCK, num_warps=_WARPS)
    if inplace and out is not x:
        x.copy_(out)
        return x
    return out


def _affine_act(x, scale, shift, channels, inner, spec, out=None):
    """x * scale[c] + shift[c] then ``spec``, c the channel of each element (scale None: 1)."""
    src = x.contiguous()
    out = torch.empty_like(src) if out is None else out
    n = src.numel()
    if n:
        has = scale is not None
        _channel_act_kernel[_grid(n)](
            src, out, scale if has else shift, shift.contiguous(), n, inner, channels,
            float(spec[1]), float(spec[2]), HAS_SCALE=has, KIND=spec[0], BLOCK=_BLOCK,
            num_warps=_WARPS,
        )
    return out


def _bias_act(y, bias, inner, spec):
    """A library result ``y`` (fresh, contiguous) plus its per-channel bias, then ``spec``."""
    y = y.contiguous()
    return _affine_act(y, None, bias, bias.numel(), inner, spec, out=y)


def _bn_train(x, channels, inner, weight, bias, eps, running_mean, running_var, momentum):
    """Training-mode batch norm's per-channel (scale, shift) from the batch's moments; the
    running statistics (when given) updated with ``momentum`` as torch does."""
    x = x.contiguous()
    count = x.numel() // channels
    part = _partials(x, channels, inner, count)
    scale = torch.empty(channels, device=x.device, dtype=torch.float32)
    shift = torch.empty_like(scale)
    track = running_mean is not None
    _bn_finalize_kernel[(channels,)](
        x, part, weight if weight is not None else scale, bias if bias is not None else scale,
        running_mean if track else scale, running_var if track else scale, scale, shift,
        float(count), inner, part.shape[1], float(eps), float(momentum),
        HAS_W=weight is not None, HAS_B=bias is not None, TRACK=track,
        BLOCK_S=triton.next_power_of_2(part.shape[1]),
    )
    return scale, shift


def _partials(x, channels, inner, count):
    """Per channel and chunk of its elements: the sums of (x - k) and (x - k)^2."""
    count = x.numel() // channels
    chunks = max(1, min(triton.cdiv(count, 4 * _BLOCK), max(1, 1024 // channels)))
    chunk = triton.cdiv(triton.cdiv(count, chunks), _BLOCK) * _BLOCK
    chunks = triton.cdiv(count, chunk)
    part = torch.empty((channels, chunks, 2), device=x.device, dtype=torch.float32)
    _moments_kernel[(channels, chunks)](x, part, count, inner, channels, chunk, chunks,
                                        BLOCK=_BLOCK, num_warps=_WARPS)
    return part


def _rows(x, mode, weight=None, bias=None, eps=0.0):
    """Softmax (mode 0), log-softmax (1) or layer norm (2) of each row of ``x`` (last dim)."""
    src = x.contiguous()
    out = torch.empty_like(src)
    cols = src.shape[-1] if src.dim() else 1
    rows = src.numel() // max(cols, 1)
    if rows and cols:
        block = min(_BLOCK, triton.next_power_of_2(cols))
        _rows_kernel[(rows,)](
            src, out, weight if weight is not None else src, bias if bias is not None else src,
            cols, float(eps), MODE=mode, HAS_W=weight is not None, HAS_B=bias is not None,
            BLOCK=block, num_warps=_WARPS,
        )
    return out
'''
