"""Seeded random tasks of the offline families beyond rows, elementwise chains and GEMMs
(:mod:`htam.tasks.random_shapes` asks for them by name): scans, pooling, losses, ``einsum``
products and a float forward argument. Each generator returns the input shape, the
``__init__`` line, the forward expression, the inputs, the forward's arguments and the family
the offline matcher should put the task in."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class Drawn:
    shape: tuple[int, ...]
    init: str
    forward: str
    inputs: list[str]
    args: str
    family: str


def _names(shape: tuple[int, ...]) -> str:
    return ", ".join(f"S{i}" for i in range(len(shape)))


def scan(rng: random.Random, shape: tuple[int, ...], x: str) -> Drawn:
    """cumsum or cumprod along a random dim: plain, reversed, masked or exclusive."""
    rank = len(shape)
    d = rng.randrange(rank)
    dim = rng.choice([d, d - rank])
    op = rng.choice(["cumsum", "cumsum", "cumprod"])
    inputs, args = [x if op == "cumsum" else f"torch.rand({_names(shape)}) * 0.5 + 0.75"], "x"
    kind = rng.choice(["plain", "reverse", "masked", "exclusive"] if op == "cumsum" else ["plain"])
    if kind == "plain":
        forward = f"torch.{op}(x, dim={dim})"
    elif kind == "reverse":
        forward = f"torch.{op}(x.flip({dim}), dim={dim}).flip({dim})"
    elif kind == "masked":
        forward = f"torch.{op}(x * mask, dim={dim})"
        inputs, args = [*inputs, f"torch.rand({_names(shape)}) > 0.5"], "x, mask"
    else:
        forward = (
            f"torch.cat((torch.zeros_like(x.select({dim}, 0).unsqueeze({dim})), "
            f"torch.cumsum(x.narrow({dim}, 0, x.size({dim}) - 1), dim={dim})), dim={dim})"
        )
    return Drawn(shape, "", forward, inputs, args, "scan")


def pool(rng: random.Random, size: str) -> Drawn:
    """A max or average pooling module over 1-3 dims, its window drawn so that every output
    size is at least one."""
    nd = rng.randint(1, 3)
    kind = rng.choice(["Max", "Avg"])
    k, s = rng.randint(1, 4), rng.randint(1, 3)
    p = rng.randint(0, k // 2)
    d = rng.randint(1, 2) if kind == "Max" else 1
    side = {1: 40, 2: 12, 3: 6}[nd] if size == "small" else {1: 65536, 2: 512, 3: 64}[nd]
    lo = d * (k - 1) + 1
    spatial = tuple(rng.randint(lo, max(lo, side)) for _ in range(nd))
    shape = (
        rng.randint(1, 2 if size == "small" else 16),
        rng.randint(1, 4 if size == "small" else 64),
        *spatial,
    )
    ceil = rng.random() < 0.3
    extra = f", dilation={d}" if kind == "Max" else f", count_include_pad={rng.random() < 0.5}"
    init = f"self.pool = nn.{kind}Pool{nd}d({k}, stride={s}, padding={p}, ceil_mode={ceil}{extra})"
    return Drawn(shape, init, "self.pool(x)", [f"torch.randn({_names(shape)})"], "x", "pool")


LOSSES = [
    "F.smooth_l1_loss(x, y{r}, beta=0.5)",
    "F.huber_loss(x, y{r}, delta=1.5)",
    "F.mse_loss(x, y{r})",
    "F.l1_loss(x, y{r})",
    "F.soft_margin_loss(x, y{r})",
]


def loss(rng: random.Random, shape: tuple[int, ...], x: str) -> Drawn:
    """A loss of two inputs reduced by its mean or sum (a row), or kept elementwise."""
    reduction = rng.choice(["mean", "sum", "none"])
    forward = rng.choice(LOSSES).format(r=f", reduction={reduction!r}")
    y = f"torch.randn({_names(shape)}) * 2.0"
    family = "elementwise" if reduction == "none" else "row"
    return Drawn(shape, "", forward, [x, y], "x, y", family)


def einsum(rng: random.Random, size: str) -> Drawn:
    """A matrix product spelled as ``einsum``: over a batch of rows, or batch by batch."""
    cap = 16 if size == "small" else 1024
    b, i, j, k = (rng.randint(1, cap) for _ in range(4))
    shape = (b, i, j)
    x = f"torch.randn({_names(shape)})"
    if rng.random() < 0.5:
        return Drawn(
            shape,
            "",
            'torch.einsum("bij,jk->bik", x, w)',
            [x, f"torch.randn(S2, {k})"],
            "x, w",
            "gemm",
        )
    return Drawn(
        shape,
        "",
        'torch.einsum("bij,bjk->bik", x, w)',
        [x, f"torch.randn(S0, S2, {k})"],
        "x, w",
        "gemm",
    )


def scalar(rng: random.Random, shape: tuple[int, ...], x: str) -> Drawn:
    """A float argument of the forward in an elementwise chain."""
    forward = rng.choice(["x * s", "torch.relu(x) * s + s", "torch.sigmoid(x * s)"])
    value = round(rng.uniform(-3.0, 3.0), 3)
    return Drawn(shape, "", forward, [x, repr(value)], "x, s", "elementwise")


def norm(rng: random.Random, size: str) -> Drawn:
    """BatchNorm (training or eval mode, 1-3 d) or GroupNorm (groups dividing the channels,
    with or without affine parameters) of an input."""
    c = rng.choice([1, 2, 3, 4, 6, 8] if size == "small" else [16, 32, 64])
    spatial = rng.randint(0, 3)
    side = 6 if size == "small" else 128
    shape = (  # a batch of 2 at least: training BatchNorm needs two values per channel
        rng.randint(2, 3 if size == "small" else 32),
        c,
        *(rng.randint(1, side) for _ in range(spatial)),
    )
    if rng.random() < 0.5 and spatial >= 1:
        groups = rng.choice([g for g in range(1, c + 1) if c % g == 0])
        init = f"self.norm = nn.GroupNorm({groups}, {c}, affine={rng.random() < 0.7})"
    else:
        kind = f"BatchNorm{max(1, spatial)}d"  # 1d takes (N, C) and (N, C, L)
        init = f"self.norm = nn.{kind}({c}, affine={rng.random() < 0.7})"
        if rng.random() < 0.3:
            init += "\n        self.norm.eval()"
    x = f"torch.randn({_names(shape)}) * 2.0 + 0.5"
    return Drawn(shape, init, "self.norm(x)", [x], "x", "channel_norm")


FAMILIES = ("scan", "pool", "loss", "einsum", "scalar", "norm")
