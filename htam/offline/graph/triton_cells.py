"""The Triton recurrent cells (``_lstm_cell``, ``_gru_cell``): one kernel per time step for the
gates, the cell and the hidden state, which it also writes into the step's output slice."""

CELLS = """
@triton.jit
def _sig(v):
    return 1.0 / (1.0 + tl.exp(-v))


@triton.jit
def _tanh(v):
    return 2.0 / (1.0 + tl.exp(-2.0 * v)) - 1.0


@triton.jit
def _cell_kernel(gx_ptr, gh_ptr, c_ptr, h_ptr, out_ptr, n, H, out_stride,
                 LSTM: tl.constexpr, BLOCK: tl.constexpr):
    # one time step of a batch: gates (i, f, g, o / r, z, n), cell and hidden state updated in
    # place, the hidden state also written to the step's output slice
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    b = offs // H
    j = offs % H
    if LSTM:
        g0 = b * 4 * H + j
        gi = tl.load(gx_ptr + g0, mask=mask, other=0.0) + tl.load(gh_ptr + g0, mask=mask, other=0.0)
        gf = tl.load(gx_ptr + g0 + H, mask=mask, other=0.0) + tl.load(gh_ptr + g0 + H, mask=mask, other=0.0)
        gg = tl.load(gx_ptr + g0 + 2 * H, mask=mask, other=0.0) + tl.load(gh_ptr + g0 + 2 * H, mask=mask, other=0.0)
        go = tl.load(gx_ptr + g0 + 3 * H, mask=mask, other=0.0) + tl.load(gh_ptr + g0 + 3 * H, mask=mask, other=0.0)
        c = _sig(gf) * tl.load(c_ptr + offs, mask=mask, other=0.0) + _sig(gi) * _tanh(gg)
        h = _sig(go) * _tanh(c)
        tl.store(c_ptr + offs, c, mask=mask)
    else:
        g0 = b * 3 * H + j
        r = _sig(tl.load(gx_ptr + g0, mask=mask, other=0.0) + tl.load(gh_ptr + g0, mask=mask, other=0.0))
        z = _sig(tl.load(gx_ptr + g0 + H, mask=mask, other=0.0) + tl.load(gh_ptr + g0 + H, mask=mask, other=0.0))
        nn_ = _tanh(tl.load(gx_ptr + g0 + 2 * H, mask=mask, other=0.0)
                    + r * tl.load(gh_ptr + g0 + 2 * H, mask=mask, other=0.0))
        h = (1.0 - z) * nn_ + z * tl.load(h_ptr + offs, mask=mask, other=0.0)
    tl.store(h_ptr + offs, h, mask=mask)
    tl.store(out_ptr + b * out_stride + j, h, mask=mask)


def _lstm_cell(gx, gh, c, h, out):
    n = h.numel()
    _cell_kernel[_grid(n)](gx, gh, c, h, out, n, h.shape[1], out.stride(0), LSTM=True,
                           BLOCK=_BLOCK, num_warps=_WARPS)


def _gru_cell(gx, gh, h, out):
    n = h.numel()
    _cell_kernel[_grid(n)](gx, gh, h, h, out, n, h.shape[1], out.stride(0), LSTM=False,
                           BLOCK=_BLOCK, num_warps=_WARPS)
"""
