"""The convolution's geometry as the generated forward reads it from the model's convolution
module at every call (both backends put this helper into the solution file): kernel, stride,
padding, dilation and output padding as three sizes (1-d and 2-d convolutions padded in front
with a window of one), the groups, and the output sizes by torch's rule for a convolution or a
transposed convolution; and the per-convolution helper both backends' forward calls, once per
convolution of a chain."""

from __future__ import annotations

from htam.offline.ir.model import ConvIR

GEOMETRY = '''
def _conv_geometry(m, x, nd, transposed):
    """(kernel, stride, padding, dilation, input sizes, output sizes), 3 each, of the
    convolution module ``m`` over the last ``nd`` dims of ``x``."""
    def three(v, fill):
        v = tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd
        return (fill,) * (3 - nd) + tuple(int(a) for a in v)

    k = three(m.kernel_size, 1)
    s = three(m.stride, 1)
    p = three(0 if m.padding == "valid" else m.padding, 0)
    d = three(m.dilation, 1)
    op = three(m.output_padding, 0) if transposed else (0, 0, 0)
    size = (1,) * (3 - nd) + tuple(x.shape[x.dim() - nd:])
    if transposed:
        out = [(n - 1) * ss - 2 * pp + dd * (kk - 1) + oo + 1
               for n, kk, ss, pp, dd, oo in zip(size, k, s, p, d, op)]
    else:
        out = [(n + 2 * pp - dd * (kk - 1) - 1) // ss + 1
               for n, kk, ss, pp, dd in zip(size, k, s, p, d)]
    return k, s, p, d, size, tuple(out)
'''


def conv_helper(name: str, launch: list[str]) -> str:
    """A module-level function ``name(m, x, nd, transposed)``: the convolution module ``m`` of
    ``x`` by the ``launch`` lines, which see ``x`` (batched, contiguous), ``w``, ``bias``,
    ``b_arg`` (the bias, or any tensor when there is none), ``out``, the window, the sizes and
    the channel counts per group; an unbatched input is given its batch dim and loses it again."""
    body = [
        "unbatched = x.dim() == nd + 1",
        "x = (x.unsqueeze(0) if unbatched else x).contiguous()",
        "w = m.weight.contiguous()",
        "bias = m.bias",
        "k, s, p, d, size, osz = _conv_geometry(m, x, nd, transposed)",
        "groups = int(m.groups)",
        "c_in = x.shape[1]",
        "cin_g = c_in // groups",
        "cout_g = w.shape[1] if transposed else w.shape[0] // groups",
        "c_out = cout_g * groups",
        "out = torch.empty((x.shape[0], c_out) + osz[3 - nd:], dtype=torch.float32, "
        "device=x.device)",
        "if out.numel() > 0:",
        "    n_pos = x.shape[0] * osz[0] * osz[1] * osz[2]",
        "    b_arg = bias if bias is not None else w",
        *("    " + line for line in launch),
        "return out.squeeze(0) if unbatched else out",
    ]
    return f"def {name}(m, x, nd, transposed):\n" + "\n".join("    " + b for b in body)


def conv_calls(ir: ConvIR, name: str) -> list[str]:
    """Forward lines: the chain's convolutions, each through the helper ``name``."""
    lines = [f"y = {ir.source}"]
    for path, nd, transposed in ir.stages:
        lines.append(f"y = {name}(_attr(self, {path!r}), y, {nd}, {transposed})")
    return [*lines, "return y"]
