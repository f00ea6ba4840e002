"""The permute family's IR: a forward input moved to another order without arithmetic
(``x.transpose(0, 1).contiguous()``, ``x.permute(...)``, ``nn.PixelShuffle``), and the forward
lines both backends share: the moved tensor as a strided view (no copy) whose flat order is the
output's, its sizes and strides padded in front to ``RANK`` dims for one strided-copy kernel."""

from __future__ import annotations

from dataclasses import dataclass

RANK = 8  # dims of the copy kernel's index (views of more dims are refused at run time)


@dataclass
class PermuteIR:
    source: str  # the forward input moved
    steps: tuple[
        tuple[str, tuple[int, ...]], ...
    ]  # ("permute", dims) | ("shuffle"|"unshuffle", (r,))


def _view_lines(ir: PermuteIR) -> list[str]:
    """``v``: the output's elements in flat order as a strided view of the input; ``shape``:
    the output's shape."""
    lines = [f"v = {ir.source}", "shape = tuple(v.shape)"]
    for kind, args in ir.steps:
        if kind == "permute":
            lines += [f"v = v.permute{tuple(args)}", "shape = tuple(v.shape)"]
            continue
        r = args[0]  # r*r channel groups <-> r x r pixel blocks, as torch's pixel_(un)shuffle
        lines += ["*lead, c, h, w = v.shape"]
        if kind == "shuffle":
            lines += [
                f"v = v.reshape(*lead, c // {r * r}, {r}, {r}, h, w)",
                "k = len(lead)",
                "v = v.permute(*range(k), k, k + 3, k + 1, k + 4, k + 2)",
                f"shape = (*lead, c // {r * r}, h * {r}, w * {r})",
            ]
        else:
            lines += [
                f"v = v.reshape(*lead, c, h // {r}, {r}, w // {r}, {r})",
                "k = len(lead)",
                "v = v.permute(*range(k), k, k + 2, k + 4, k + 1, k + 3)",
                f"shape = (*lead, c * {r * r}, h // {r}, w // {r})",
            ]
    return lines


def permute_forward(ir: PermuteIR) -> list[str]:
    """Forward lines up to the launch: ``v``, ``out``, ``n``, ``sizes`` and ``strides``."""
    return [
        *_view_lines(ir),
        "out = torch.empty(shape, dtype=torch.float32, device=v.device)",
        "n = out.numel()",
        "if n == 0:",
        "    return out",
        f"if v.dim() > {RANK}:",
        f"    raise ValueError('ModelNew moves a view of more than {RANK} dims')",
        f"sizes = (1,) * ({RANK} - v.dim()) + tuple(v.shape)",
        f"strides = (0,) * ({RANK} - v.dim()) + tuple(v.stride())",
    ]
