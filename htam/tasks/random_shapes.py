"""Seeded KernelBench tasks with random shapes, per operator family.

The offline templates were written against a few shapes; these tasks judge them on others: one
row, one column, odd and prime sizes, rows longer than one block, a handful of very long rows
(the split-row path), reductions over any dim with ``keepdim`` either way, non-contiguous
inputs (a transposed view or every other column), and (family ``conv``, asked for by name) a
convolution of any kind with an activation after it: the library path's channels-last epilogue,
with channel counts on both sides of its 32-channel tile; the families of
:mod:`htam.tasks.random_families` (scan, pool, loss, einsum, scalar, norm, convolution,
special_loss, attention, triangular) are asked for by name too. At a tiny size for CPU tests
or up to KernelBench's sizes for the GPU. It lives under ``htam.tasks`` because it makes tasks,
like the suites do: the CPU test, ``scripts/experiments/random_shapes.py`` and any proposer can use it.

``random_tasks(n, seed, size)`` returns ``n`` :class:`GeneratedTask` (a :class:`Task` plus the
family the offline matcher should put it in); the same seed gives the same tasks.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass

from htam.tasks import random_families
from htam.tasks.random_families import Drawn
from htam.tasks.task import Task

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
# Total elements of the largest input: CPU tests run the Triton interpreter, the GPU runs
# KernelBench-sized problems (KernelBench level 1 inputs hold 2^24 to 2^30 elements).
CAPS = {"small": 1 << 8, "large": 1 << 27}
ACTIVATIONS = [
    "torch.relu(x)",
    "torch.sigmoid(x)",
    "torch.tanh(x)",
    "F.gelu(x)",
    "F.gelu(x, approximate='tanh')",
    "F.silu(x)",
    "F.leaky_relu(x, negative_slope=0.2)",
    "F.elu(x, alpha=0.7)",
    "torch.selu(x)",
    "F.hardsigmoid(x)",
    "F.hardswish(x)",
    "F.softplus(x)",
    "F.softsign(x)",
    "F.hardtanh(x, min_val=-0.5, max_val=0.5)",
    "F.mish(x)",
    "F.logsigmoid(x)",
    "x * torch.sigmoid(x)",
    "0.5 * x * (1.0 + torch.tanh(0.7978845608 * (x + 0.044715 * torch.pow(x, 3.0))))",
]


@dataclass(frozen=True)
class GeneratedTask:
    task: Task
    family: str  # "elementwise" | "row" | "gemm": what the offline matcher should find
    shape: tuple[int, ...]
    layout: str  # "contiguous" | "transposed" | "strided"


def _dim(rng: random.Random, cap: int) -> int:
    kind = rng.random()
    if kind < 0.15:
        return 1
    if kind < 0.45:
        return rng.randint(2, 9)
    if kind < 0.85:
        return rng.randint(10, max(10, min(cap, 300)))
    return rng.randint(300, max(300, cap))


def random_shape(rng: random.Random, size: str, rank: int | None = None) -> tuple[int, ...]:
    """A shape of ``rank`` (1-4 when None) whose product stays under the size's cap."""
    cap = CAPS[size]
    rank = rank or rng.randint(1, 4)
    dims: list[int] = []
    for i in range(rank):
        left = max(1, cap // max(1, math.prod(dims)) // (2 ** (rank - i - 1)))
        dims.append(min(_dim(rng, cap), left))
    rng.shuffle(dims)
    return tuple(dims)


def long_rows(rng: random.Random, size: str) -> tuple[int, ...]:
    """A few rows far longer than one block: the split-row path."""
    rows = rng.randint(1, max(1, min(5, CAPS[size] // 8192)))
    return (rows, rng.randint(4097, max(5000, CAPS[size] // rows)))


def _input(shape: tuple[int, ...], layout: str) -> str:
    names = ", ".join(f"S{i}" for i in range(len(shape)))
    if layout == "transposed" and len(shape) >= 2:
        swapped = [f"S{i}" for i in range(len(shape))]
        swapped[-1], swapped[-2] = swapped[-2], swapped[-1]
        return f"torch.randn({', '.join(swapped)}).transpose(-1, -2)"
    if layout == "strided":
        last = len(shape) - 1
        wide = ", ".join(f"S{i}" if i < last else f"2 * S{i}" for i in range(len(shape)))
        return f"torch.randn({wide})[..., ::2]"
    return f"torch.randn({names})"


def _source(shape, forward: str, inputs: list[str], init: str = "", args: str = "x") -> str:
    consts = "".join(f"S{i} = {n}\n" for i, n in enumerate(shape))
    init_body = init or "pass"
    return (
        f"{HEAD}\n{consts}\n\nclass Model(nn.Module):\n"
        f"    def __init__(self):\n        super().__init__()\n        {init_body}\n\n"
        f"    def forward(self, {args}):\n        return {forward}\n\n\n"
        f"def get_inputs():\n    return [{', '.join(inputs)}]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


def _row_forward(rng: random.Random, shape: tuple[int, ...], last: bool) -> tuple[str, str]:
    """(forward expression of x, __init__ line) of a random row operation over ``shape``
    (over its last dim when ``last``)."""
    rank = len(shape)
    d = rank - 1 if last else rng.randrange(rank)
    dim = rng.choice([d, d - rank])
    keep = rng.choice([True, False])
    k = rng.randint(1, rank)
    trailing = ", ".join(f"S{i}" for i in range(rank - k, rank))
    choices = [
        (f"torch.softmax(x, dim={dim})", ""),
        (f"F.log_softmax(x * 1.5, dim={dim})", ""),
        (f"torch.sum(x, dim={dim}, keepdim={keep})", ""),
        (f"torch.mean(x, dim={dim}, keepdim={keep})", ""),
        (f"torch.amax(x, dim={dim}, keepdim={keep})", ""),
        (f"torch.min(x, dim={dim}, keepdim={keep})[0]", ""),
        (f"torch.argmax(x, dim={dim}, keepdim={keep})", ""),
        (f"torch.argmin(x, dim={dim})", ""),
        # unbiased over one element is NaN (0/0): a shape the check could not compare
        (
            f"torch.var(x, dim={dim}, unbiased={shape[d] > 1 and rng.random() < 0.5}, keepdim={keep})",
            "",
        ),
        (f"torch.std(x, dim={dim}, unbiased={shape[d] > 1})", ""),
        (f"torch.norm(x, p={rng.choice([1, 2])}, dim={dim})", ""),
        (f"torch.logsumexp(x, dim={dim})", ""),
        (f"F.normalize(x, p=2.0, dim={dim})", ""),
        ("self.ln(x)", f"self.ln = nn.LayerNorm(({trailing},))"),
        ("x / torch.sqrt(torch.mean(x ** 2, dim=-1, keepdim=True) + 1e-5)", ""),
        ("torch.relu(x - x.mean(dim=-1, keepdim=True))", ""),
        ("torch.sum(x)", ""),
        ("torch.mean(torch.clamp(1 - x * 0.5, min=0))", ""),
    ]
    return rng.choice(choices)


def _bias_shape(rng: random.Random, shape: tuple[int, ...]) -> str:
    """A broadcast operand: full, the last dim, a channel (C, 1, ...), or one element."""
    rank = len(shape)
    kind = rng.choice(["full", "last", "channel", "one"])
    if kind == "full" or rank == 1:
        dims = [f"S{i}" for i in range(rank)] if kind == "full" else ["S0"]
    elif kind == "last":
        dims = [f"S{rank - 1}"]
    elif kind == "channel":
        dims = [f"S{1 % rank}"] + ["1"] * (rank - 1 - 1 % rank)
    else:
        dims = ["1"]
    return ", ".join(dims)


CONVS = {"Conv2d": 2, "Conv3d": 3, "ConvTranspose2d": 2, "ConvTranspose3d": 3}


def _conv(rng: random.Random, size: str) -> tuple[tuple[int, ...], str, str]:
    """(input shape, __init__ line, forward) of a convolution followed by an activation and,
    at times, a per-channel or one-element parameter."""
    kind = rng.choice(sorted(CONVS))
    dims = CONVS[kind]
    c_in, c_out = rng.randint(1, 8), rng.choice([1, 3, rng.randint(2, 40)])
    kernel, stride = rng.randint(1, 3), rng.randint(1, 2)
    pad = rng.randint(0, (kernel - 1) // 2)  # every output size at least 1, transposed too
    side = 9 if size == "small" else (64 if dims == 3 else 256)
    spatial = [rng.randint(kernel, max(kernel, side)) for _ in range(dims)]
    shape = (rng.randint(1, 3 if size == "small" else 32), c_in, *spatial)
    init = f"self.conv = nn.{kind}({c_in}, {c_out}, {kernel}, stride={stride}, padding={pad})"
    single = [a for a in ACTIVATIONS if len(re.findall(r"\bx\b", a)) == 1]
    forward = re.sub(r"\bx\b", "self.conv(x)", rng.choice(single))
    if rng.random() < 0.5:
        b = rng.choice([f"{c_out}" + ", 1" * dims, "1"])
        init += f"\n        self.b = nn.Parameter(torch.randn({b}))"
        forward = f"{forward} * 0.5 + self.b"
    return shape, init, forward


def _other_family(rng: random.Random, family: str, size: str, layout: str) -> Drawn:
    """A task of one of the families of :mod:`htam.tasks.random_families`."""
    if family in random_families.SIZED:
        return getattr(random_families, family)(rng, size)
    shape = random_shape(rng, size)
    return getattr(random_families, family)(rng, shape, _input(shape, layout))


def make_task(rng: random.Random, family: str, size: str, index: int) -> GeneratedTask:
    layout = rng.choice(["contiguous", "contiguous", "transposed", "strided"])
    if family in random_families.FAMILIES:
        drawn = _other_family(rng, family, size, layout)
        source = _source(drawn.shape, drawn.forward, drawn.inputs, drawn.init, drawn.args)
        name = f"random_{family}_{index}"
        task = Task(id=f"random/{name}", name=name, source=source)
        return GeneratedTask(task, drawn.family, drawn.shape, layout)
    if family == "conv":
        shape, init, forward = _conv(rng, size)
        source = _source(shape, forward, [_input(shape, "contiguous")], init)
        name = f"random_conv_{index}"
        task = Task(id=f"random/{name}", name=name, source=source)
        return GeneratedTask(task, "elementwise", shape, "contiguous")
    long = family == "row" and rng.random() < 0.2
    if long:
        shape = long_rows(rng, size)
    else:
        shape = random_shape(rng, size, rank=2 if family == "gemm" else None)
    if family == "row":
        forward, init = _row_forward(rng, shape, long)
        inputs, args = [_input(shape, layout)], "x"
        if rng.random() < 0.15:  # a loss over two inputs, reduced to one value
            forward = rng.choice(["torch.mean((x - y) ** 2)", "torch.mean(torch.abs(x - y))"])
            inputs, args, init = [_input(shape, layout), _input(shape, "contiguous")], "x, y", ""
    elif family == "elementwise":
        forward, init = rng.choice(ACTIVATIONS), ""
        inputs, args = [_input(shape, layout)], "x"
        if rng.random() < 0.4:
            b = _bias_shape(rng, shape)
            init = f"self.b = nn.Parameter(torch.randn({b}))"
            forward = f"{forward} * 0.5 + self.b"
    else:
        k = shape[1]
        n = rng.choice([1, 3, rng.randint(2, 200)])
        shape = (shape[0], k)
        init = f"self.fc = nn.Linear(S1, {n})"
        forward = rng.choice(["self.fc(x)", "torch.relu(self.fc(x))", "self.fc(x) * 2.0 + 1.0"])
        inputs, args = [_input(shape, layout)], "x"
    source = _source(shape, forward, inputs, init, args)
    name = f"random_{family}_{index}"
    return GeneratedTask(Task(id=f"random/{name}", name=name, source=source), family, shape, layout)


def random_tasks(
    n: int,
    seed: int = 0,
    size: str = "small",
    families: tuple[str, ...] = ("row", "elementwise", "gemm"),
) -> list[GeneratedTask]:
    """``n`` tasks cycling through ``families``, shapes drawn from ``random.Random(seed)``."""
    if size not in CAPS:
        raise ValueError(f"size must be {' or '.join(sorted(CAPS))}, not {size!r}")
    rng = random.Random(seed)
    return [make_task(rng, families[i % len(families)], size, i) for i in range(n)]
