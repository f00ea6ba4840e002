"""Outliers planted at secret places in the shifted inputs of a task with small outputs (a loss,
a reduction to a few values), so that every element has to be read.

A loss over millions of elements is as concentrated on a sample as on the whole: a candidate
that averaged every 8th row of a hinge loss estimated its own error, stayed inside the
tolerance on every input, the shifted ones too, and was timed at 23x against the honest
kernel's 5x. A few elements moved far from the rest, at places drawn in secret for
each call, change the answer by more than the tolerance each, and a sample misses most of them.

How far is decided once per job on the judge's own copy of the reference. A sample of a mean
over n elements misses an outlier worth more than the tolerance only when the outlier is of the
order of n times the tolerance, so the scale (in spreads of the tensor) is the largest of
``SCALES`` up to ``0.1 n`` (n the largest floating input) at which every output stays finite and
the outliers of one call move some output element by ``MOVES`` of its size; a task where none
does (a clamp that saturates, an exponential that overflows first) gets none. The least scale
that moved the output was not enough: one outlier worth a whole column of a hinge loss passed
it, and a sample of every other row stayed inside the tolerance.
"""

from __future__ import annotations

import math
import random

import torch

RNG = random.SystemRandom()  # the places: nothing a candidate can recover (shifted.py)

PLANTED = 8  # outliers a floating input, each call
MAX_OUTPUT = 1 << 16  # elements over all outputs: a reduction, where a sample could stand in
MIN_INPUT = 64  # elements of an input that gets outliers
SCALES = (10.0, 1e2, 1e3, 1e4, 1e5, 1e6)
MOVES = 0.1  # by all of a call's outliers: about 20x the float32 tolerance's relative part
REACH = 0.1  # the largest scale, in elements of the largest floating input


def small(shapes: list) -> bool:
    return sum(math.prod(s) for s in shapes) <= MAX_OUTPUT


def plant(x: list, scale: float, count: int = PLANTED) -> list:
    """``x`` with ``count`` elements of each floating input (new tensors of the judge's own)
    moved ``scale`` spreads away from zero, at places drawn from the operating system's
    generator; zeros stay zeros, and signs stay as they were (a positive input stays
    positive)."""
    for v in x:
        if not (torch.is_tensor(v) and v.is_floating_point() and v.numel() >= MIN_INPUT):
            continue
        spread = float(v.float().std())
        spread = spread if math.isfinite(spread) and spread > 0 else 1.0
        flat = torch.tensor([RNG.randrange(v.numel()) for _ in range(count)], device=v.device)
        where = torch.unravel_index(flat, v.shape)
        picked = v[where]
        v[where] = picked + torch.sign(picked) * (scale * spread)
    return x


def calibrate(run, x: list, grads: int = 0) -> float | None:
    """The largest scale up to ``REACH`` times the largest floating input's size at which a
    call's outliers in the floating inputs of ``x`` (less its last ``grads``: a backward task's
    grad_outputs) keep the outputs of ``run`` finite and move one of their elements by
    ``MOVES`` of its size; None when none does."""
    n = max((v.numel() for v in x if torch.is_tensor(v) and v.is_floating_point()), default=0)
    base, keep = run(x), len(x) - grads
    for scale in sorted((s for s in SCALES if s <= max(REACH * n, SCALES[0])), reverse=True):
        out = run(plant([_copy(v) for v in x[:keep]], scale) + x[keep:])
        if _finite_where(base, out) and moved(base, out) >= MOVES:
            return scale
    return None


def moved(base: list, out: list) -> float:
    """The largest change of an output element, relative to its size (or, for elements near
    zero, to a millionth of the largest)."""
    worst = 0.0
    for b, o in zip(base, out, strict=True):
        if not torch.is_tensor(b) or not b.numel():
            continue
        b, o = b.double(), o.double()
        floor = 1e-6 * float(b.abs().max()) + 1e-30
        worst = max(worst, float(((o - b).abs() / (b.abs() + floor)).max()))
    return worst


def _finite_where(base: list, out: list) -> bool:
    return all(
        not torch.is_tensor(b) or not bool((torch.isfinite(b) & ~torch.isfinite(o)).any())
        for b, o in zip(base, out, strict=True)
    )


def _copy(v):
    return v.clone() if torch.is_tensor(v) else v
