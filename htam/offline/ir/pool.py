"""The pooling window as the generated forward reads it from the model's pooling module at
every call (both backends put this helper into the solution file): the kernel, stride, padding
and dilation as three sizes (1-d and 2-d pooling padded in front with a window of one), and the
output sizes by torch's rule, ceil mode included."""

GEOMETRY = '''
def _pool_geometry(m, x, nd):
    """(kernel, stride, padding, dilation, input sizes, output sizes), 3 each, of the pooling
    module ``m`` over the last ``nd`` dims of ``x``."""
    def three(v, fill):
        v = tuple(v) if isinstance(v, (tuple, list)) else (v,) * nd
        return (fill,) * (3 - nd) + tuple(int(a) for a in v)

    k = three(m.kernel_size, 1)
    s = three(m.stride if m.stride else m.kernel_size, 1)
    p = three(m.padding, 0)
    d = three(getattr(m, "dilation", 1), 1)
    size = (1,) * (3 - nd) + tuple(x.shape[x.dim() - nd:])
    out = []
    for n, kk, ss, pp, dd in zip(size, k, s, p, d):
        num = n + 2 * pp - dd * (kk - 1) - 1
        o = (-(-num // ss) if m.ceil_mode else num // ss) + 1
        if m.ceil_mode and (o - 1) * ss >= n + pp:
            o -= 1
        out.append(o)
    return k, s, p, d, size, tuple(out)
'''


def pool_forward(source: str, module: str, nd: int, kind: str) -> list[str]:
    """Forward lines up to the launch: ``x``, ``out``, the window and the sizes."""
    return [
        f"m = _attr(self, {module!r})",
        f"x = {source}.contiguous()",
        f"k, s, p, d, size, osz = _pool_geometry(m, x, {nd})",
        f"out = torch.empty(x.shape[:x.dim() - {nd}] + osz[{3 - nd}:], dtype=torch.float32, "
        "device=x.device)",
        "if out.numel() == 0:",
        "    return out",
        "n = out.numel()",
        *(
            [
                'divisor = int(getattr(m, "divisor_override", None) or 0)',
                "count_pad = bool(m.count_include_pad)",
            ]
            if kind == "avg"
            else ["divisor, count_pad = 0, False"]
        ),
    ]


ADAPTIVE = '''
def _adaptive_geometry(m, x, nd):
    """(largest window, input sizes, output sizes), 3 each, of the adaptive pooling module
    ``m`` over the last ``nd`` dims of ``x``: output ``i`` of a dim of ``n`` pools
    ``[floor(i n / o), ceil((i + 1) n / o))``; an output size of None keeps the input's."""
    size = tuple(int(v) for v in x.shape[x.dim() - nd:])
    o = m.output_size
    o = tuple(o) if isinstance(o, (tuple, list)) else (o,) * nd
    o = tuple(n if v is None else int(v) for n, v in zip(size, o))
    size, o = (1,) * (3 - nd) + size, (1,) * (3 - nd) + o
    k = tuple(-(-n // v) + (1 if n % v else 0) for n, v in zip(size, o))
    return k, size, o
'''


def adaptive_forward(source: str, module: str, nd: int) -> list[str]:
    """Forward lines up to the launch of an adaptive pooling: ``x``, ``out``, the largest
    window ``k`` and the sizes."""
    return [
        f"m = _attr(self, {module!r})",
        f"x = {source}.contiguous()",
        f"k, size, osz = _adaptive_geometry(m, x, {nd})",
        f"out = torch.empty(x.shape[:x.dim() - {nd}] + osz[{3 - nd}:], dtype=torch.float32, "
        "device=x.device)",
        "if out.numel() == 0:",
        "    return out",
        "n = out.numel()",
    ]
