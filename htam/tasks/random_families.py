"""Seeded random tasks of the offline families beyond rows, elementwise chains and GEMMs
(:mod:`htam.tasks.random_shapes` asks for them by name): scans, pooling, losses, ``einsum``
products, a float forward argument, BatchNorm / GroupNorm, convolutions (plain and transposed),
cross-entropy / KL / triplet losses, attention and triangular matrix products. Each generator
returns the input shape, the ``__init__`` line, the forward expression, the inputs, the
forward's arguments and the family the offline matcher should put the task in."""

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


def _conv_sizes(rng: random.Random, transposed: bool) -> tuple[int, int, int, int, int]:
    """(kernel, stride, padding, dilation, output padding) of one spatial dim."""
    k, s, d = rng.randint(1, 3), rng.randint(1, 2), rng.choice([1, 1, 2])
    p = rng.randint(0, d * (k - 1) // 2)
    out_pad = rng.randint(0, max(s, d) - 1) if transposed else 0
    return k, s, p, d, out_pad


def convolution(rng: random.Random, size: str) -> Drawn:
    """A 1-3 d convolution or transposed convolution module (stride, padding, dilation,
    groups, depthwise) of an input, batched or not, its bias off or out of a library prefix's
    reach (in a Sequential); sometimes depthwise then pointwise."""
    nd, transposed = rng.randint(1, 3), rng.random() < 0.4
    cap = 8 if size == "small" else 64
    c_in = rng.randint(1, cap)
    groups = rng.choice([g for g in range(1, c_in + 1) if c_in % g == 0])
    c_out = groups * rng.randint(1, max(1, cap // groups))
    dims = [_conv_sizes(rng, transposed) for _ in range(nd)]
    side = ({1: 9, 2: 9, 3: 5} if size == "small" else {1: 4096, 2: 128, 3: 24})[nd]
    # the smallest input giving one output: conv needs the dilated window inside the padded input
    spatial = tuple(
        rng.randint(max(1, d * (k - 1) + 1 - 2 * p), max(1, side)) for k, _, p, d, _ in dims
    )
    batch = () if rng.random() < 0.15 else (rng.randint(1, 2 if size == "small" else 16),)
    shape = (*batch, c_in, *spatial)

    def spell(i: int) -> str:
        values = [dim[i] for dim in dims]
        return (
            str(values[0]) if len(set(values)) == 1 and rng.random() < 0.5 else str(tuple(values))
        )

    kind = f"{'ConvTranspose' if transposed else 'Conv'}{nd}d"
    extra = f", output_padding={spell(4)}" if transposed else ""
    bias = rng.random() < 0.4
    module = (
        f"nn.{kind}({c_in}, {c_out}, {spell(0)}, stride={spell(1)}, padding={spell(2)}, "
        f"dilation={spell(3)}{extra}, groups={groups}, bias={bias})"
    )
    init = f"self.conv = nn.Sequential({module})" if bias else f"self.conv = {module}"
    forward = "self.conv(x)"
    if not transposed and batch and rng.random() < 0.2:
        # depthwise then pointwise: the second convolution's bias stays in the chain
        init = (
            f"self.depthwise = nn.{kind}({c_in}, {c_in}, 3, padding=1, groups={c_in}, bias=False)"
        )
        init += f"\n        self.pointwise = nn.{kind}({c_in}, {c_out}, 1)"
        forward = "self.pointwise(self.depthwise(x))"
    return Drawn(shape, init, forward, [f"torch.randn({_names(shape)})"], "x", "conv")


def special_loss(rng: random.Random, size: str) -> Drawn:
    """Cross-entropy of logits and class indices (ignored class or not), KL divergence (of a
    log or of log targets) or a triplet margin loss (the module or the function), each with a
    drawn reduction."""
    n = rng.randint(1, 16 if size == "small" else 4096)
    c = rng.randint(2, 64 if size == "small" else 8192)
    shape, x = (n, c), "torch.randn(S0, S1)"
    kind = rng.choice(["cross_entropy", "kl_div", "triplet"])
    if kind == "cross_entropy":
        reduction = rng.choice(["mean", "sum", "none"])
        ignore = f", ignore_index={rng.randrange(c)}" if rng.random() < 0.3 else ""
        forward = f"F.cross_entropy(x, t{ignore}, reduction={reduction!r})"
        return Drawn(
            shape, "", forward, [f"{x} * 3", "torch.randint(0, S1, (S0,))"], "x, t", "loss"
        )
    if kind == "kl_div":
        reduction = rng.choice(["batchmean", "batchmean", "sum", "mean"])
        if rng.random() < 0.5:
            forward = f"F.kl_div(torch.log(p), q, reduction={reduction!r})"
            inputs = ["torch.rand(S0, S1).softmax(-1)"] * 2
        else:
            forward = f"F.kl_div(p, q, reduction={reduction!r}, log_target=True)"
            inputs = [x, x]
        return Drawn(shape, "", forward, inputs, "p, q", "loss")
    reduction = rng.choice(["mean", "sum", "none"])
    margin = round(rng.uniform(0.1, 2.0), 2)
    init, forward = "", f"F.triplet_margin_loss(a, p, n, margin={margin}, reduction={reduction!r})"
    if rng.random() < 0.5:
        init = f"self.loss_fn = nn.TripletMarginLoss(margin={margin}, reduction={reduction!r})"
        forward = "self.loss_fn(a, p, n)"
    inputs = ["torch.rand(S0, S1) * 0.5", "torch.rand(S0, S1)", "torch.rand(S0, S1)"]
    return Drawn(shape, init, forward, inputs, "a, p, n", "loss")


def attention(rng: random.Random, size: str) -> Drawn:
    """Scaled-dot-product attention of query, key and value of one shape (with heads or
    without), causal or not, its scale the default or drawn."""
    small = size == "small"
    seq = rng.randint(1, 16 if small else 4096)
    head = rng.randint(8, 16) if small else rng.choice([32, 64, 128])
    heads = (rng.randint(1, 2 if small else 16),) if rng.random() < 0.7 else ()
    shape = (rng.randint(1, 1 if small else 8), *heads, seq, head)
    causal = f", is_causal={rng.random() < 0.5}"
    scale = f", scale={round(rng.uniform(0.05, 0.5), 3)}" if rng.random() < 0.3 else ""
    forward = f"F.scaled_dot_product_attention(q, k, v{causal}{scale})"
    inputs = [f"torch.randn({_names(shape)})"] * 3
    return Drawn(shape, "", forward, inputs, "q, k, v", "attention")


def triangular(rng: random.Random, size: str) -> Drawn:
    """The upper or lower triangle (diagonal drawn) of a product of two matrices."""
    cap = 48 if size == "small" else 4096
    shape = tuple(rng.randint(1, cap) for _ in range(3))
    op = rng.choice(["triu", "tril"])
    product = rng.choice(["torch.matmul(a, b)", "a @ b"])
    diagonal = rng.choice([0, 0, rng.randint(-4, 4)])
    forward = f"torch.{op}({product}{f', diagonal={diagonal}' if diagonal else ''})"
    inputs = ["torch.randn(S0, S1)", "torch.randn(S1, S2)"]
    return Drawn(shape, "", forward, inputs, "a, b", "triangular")


FAMILIES = (
    "scan",
    "pool",
    "loss",
    "einsum",
    "scalar",
    "norm",
    "convolution",
    "special_loss",
    "attention",
    "triangular",
)
# the generators drawing their own shapes from the size alone
SIZED = ("pool", "norm", "einsum", "convolution", "special_loss", "attention", "triangular")
