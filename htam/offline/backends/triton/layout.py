"""A convolution's input handed over in channels-last memory by one tiled kernel.

With its weights channels-last, cuDNN converts an input in the reference's order itself, by
torch's strided copy; on the H200 that copy ran at about half the bandwidth of a tiled one
(device run 24, KernelBench level 2 task 1: 0.568 ms, where torch.compile's transposing kernel
took 0.25 ms), and it is a pass over the largest input. The forward converts such inputs first.
"""

from __future__ import annotations

from htam.offline.ir.model import Match

TO_CHANNELS_LAST = '''
@triton.jit
def htam_to_cl(out_ptr, in_ptr, C, S, BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    # [BLOCK_S, BLOCK_C] tiles of one sample: read along the positions, written along channels
    b = tl.program_id(2).to(tl.int64)
    s = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)[:, None]
    c = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)[None, :]
    mask = (s < S) & (c < C)
    v = tl.load(in_ptr + b * C * S + c * S + s, mask=mask)
    tl.store(out_ptr + b * C * S + s * C + c, v, mask=mask)


def _to_channels_last(x):
    """``x`` (4-d or 5-d) in channels-last memory, as a convolution with channels-last weights
    reads it."""
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    if x.dim() not in (4, 5) or x.is_contiguous(memory_format=fmt):
        return x
    x = x.contiguous()
    out = torch.empty_like(x, memory_format=fmt)
    C, S = x.shape[1], math.prod(x.shape[2:])
    if out.numel():
        bc = min(64, triton.next_power_of_2(C))
        bs = max(16, 4096 // bc)
        grid = (triton.cdiv(S, bs), triton.cdiv(C, bc), x.shape[0])
        htam_to_cl[grid](out, x, C, S, BLOCK_S=bs, BLOCK_C=bc, num_warps=4)
    return out
'''


def input_layout(match: Match) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(module-level code, forward lines before the prelude) converting the inputs the prefix's
    convolutions read; nothing when there are none."""
    if not match.conv_inputs:
        return (), ()
    return (TO_CHANNELS_LAST,), tuple(f"{x} = _to_channels_last({x})" for x in match.conv_inputs)
