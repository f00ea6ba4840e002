"""One more trial, on inputs the task's ``get_inputs`` never draws, where a statistic of its
distribution can stand in for the work.

A loss over a billion elements is concentrated: on every draw of KernelBench's 100_HingeLoss
(predictions uniform in [0, 1), targets +-1) it is 1 - 0.5 * mean(targets) to within 1e-5, and
a C++ candidate that read only the targets passed every trial at 86x (95_CrossEntropy
too, at 168x). Fresh draws of the same distribution cannot tell such a shortcut from the work.

So the judge runs one trial on inputs scaled and shifted per tensor (``x * a + b * std(x)``, a
in [1/3, 3], b in [-1, 1], zeros left as they are: a triangular or sparse input keeps its
structure), with 10-30% of each integer input's elements set to one of its values, which
moves every such statistic. A task whose reference cannot take them (a
probability input that must stay in [0, 1], a logarithm of a shifted value) gets a milder shift,
scaling only (a in [0.5, 1]); where the reference cannot take that either (it raises, or returns
a non-finite value where it returned a finite one), there is no such trial. The judge decides
this on its own copy of the reference before either runner sees the inputs. Outputs of every
size, the large ones (more than 65,536 elements) scaled only: a normalization's statistic is a
shortcut too (``x / ||x||`` with ``x`` uniform in [0, 1)
has ``||x|| = sqrt(n / 3)`` to 1e-4, and a layer norm over rand rows has mean 1/2 and variance
1/12), so large outputs are no proof of each element's own work (a Frobenius norm
that never read x for its norm, 2.3x against the honest kernel's 1.23x).

A candidate that counted its calls could do the work on the trials and take the shortcut on the
timed calls, whose inputs come from the task's distribution. So every timed call's fresh inputs
are shifted, each time with fresh a and b (checked on the judge's copy again): the comparison of
every timed output then catches a shortcut on any of them, and no one shift can be learned from
one call and reused. (Shifting half of them in secret left the other half to a candidate that
told shifted inputs apart.) Outliers (needles.py) go into fewer than half of them
(judge_timing.outlier_calls). What remains possible: a candidate that samples its
inputs to estimate their distribution before taking the shortcut (docs/evaluator.md).

A backward task's shifts move its inputs, not the ``grad_outputs`` drawn for the call, and the
judge's copy takes the whole training step: without them a forward that returned its inputs'
mean as a constant passed with an exact gradient (1.5x against the honest 1.1x).

Every draw (a, b, and the places of the outliers) comes from the operating system's generator,
not from a seeded one: torch's CPU generator keeps 32 bits of its seed, so one generator seeded
per job could be recovered from the outliers of the untimed trial (2^32 seeds, a second of a
GPU) and then told every timed call's shift and outliers.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from typing import Any

import torch

from htam.evaluate.judge import gradients, needles
from htam.evaluate.judge.trusted_jobs import as_list, build

RNG = random.SystemRandom()  # os.urandom: nothing a candidate can recover and replay
CALIBRATIONS = 4  # fresh shifts on which the outliers' scale is sought (needles.calibrate)


def applies(outputs: list) -> bool:
    """A floating output (a statistic of the inputs can stand in for the work of any size);
    integer outputs beside it are compared exactly on the same inputs (a loss that also
    returned a count had no shifted inputs at all: 357x)."""
    return any(torch.is_tensor(t) and t.is_floating_point() for t in outputs)


Shift = list  # per input: (a, b) for a floating tensor, a share to skew for an integer one, None


def _params(x: list, mild: bool) -> Shift:
    out: Shift = []
    for v in x:
        if torch.is_tensor(v) and not v.is_floating_point() and v.numel() >= needles.MIN_INPUT:
            # the strong kind skews an integer input's values (labels, indices, counts)
            out.append(None if mild else 0.1 + 0.2 * RNG.random())
            continue
        if not (torch.is_tensor(v) and v.is_floating_point() and v.numel()):
            out.append(None)
            continue
        u = [RNG.random(), RNG.random()]
        if mild:
            out.append((0.5 + 0.5 * u[0], 0.0))
            continue
        spread = float(v.float().std()) if v.numel() > 1 else 1.0
        spread = spread if math.isfinite(spread) and spread > 0 else 1.0
        out.append((math.exp(math.log(3.0) * (2 * u[0] - 1)), (2 * u[1] - 1) * spread))
    return out


def apply(shift: Shift, x: list, in_place: bool = False) -> list:
    """``x`` with each floating tensor scaled and shifted as ``shift`` says, zeros kept, and
    each integer one skewed (new tensors; ``in_place``: the floating ones moved where they
    are, so that a large task's inputs are not held twice)."""
    return [
        v
        if how is None
        else _skewed(v, how)
        if isinstance(how, float)
        else _moved(v, how[0], how[1], in_place=in_place)
        for how, v in zip(shift, x, strict=True)
    ]


def _skewed(v: torch.Tensor, share: float) -> torch.Tensor:
    """``v`` with a secret ``share`` of its elements set to one of its own values, drawn in
    secret: still in the task's domain (a label stays a label, an index an index), while a
    histogram of the values no longer looks like the task's draws (a frequency of
    uniform labels answered as 1/C without reading them, 534x)."""
    flat = v.flatten()
    gen = torch.Generator().manual_seed(RNG.getrandbits(63))
    mask = torch.rand(flat.shape, generator=gen) < share
    out = flat.clone()
    out[mask.to(v.device)] = flat[RNG.randrange(flat.numel())]
    return out.view(v.shape)


# Elements moved or checked at a time: the temporaries stay small (torch.isfinite takes an
# absolute value and two masks, one and a half times its input).
CHUNK = 1 << 24


def _moved(v: torch.Tensor, a: float, b: float, in_place: bool = False) -> torch.Tensor:
    if in_place and v.is_contiguous():
        flat = v.view(-1)
        for i in range(0, flat.numel(), CHUNK):
            part = flat[i : i + CHUNK]
            zero = part == 0 if b else None
            part.mul_(a)
            if zero is not None:
                part.add_(b).masked_fill_(zero, 0.0)
        return v
    out = v * a
    if b:
        out += b
        out.masked_fill_(v == 0, 0.0)
    return out


class Shifter:
    """Draws shifts of a call's inputs that the judge's own copy of the reference takes: the
    first decides between the strong and the mild kind, each later one is fresh (one shift kept
    for the job was learned from the shifted trial and answered without the work:
    223x)."""

    def __init__(self, module, init_args: list, seed: int, device: str, grads: int = 0):
        self.made = (module, init_args, seed, device)
        self.grads = grads  # a backward task's grad_outputs, last in a call's inputs: not moved
        self.model: Any = None  # the judge's own copy of the reference, built on first use
        # where the reference's outputs on the first unshifted inputs were finite (None: all)
        self.base: list = []
        self.mild: bool | None = None  # the kind that the reference takes
        self.scale: float | None = None  # of the outliers planted (needles.py), if any
        self.small = False  # outputs small enough for the strong shift and the outliers

    def first(self, draw: Callable[[], list]) -> list | None:
        """Inputs from ``draw`` shifted, deciding the kind; None when the reference takes
        neither. Each attempt moves a draw of its own in place: the judge never holds a call's
        inputs and their shifted copy at once (on a large task, a copy of its tensors)."""
        x = draw()
        try:
            module, init_args, seed, device = self.made
            self.model = build(module.Model, init_args, seed, device)
            self.base = [_finite(o) for o in self._run(x)]
        except Exception:  # noqa: BLE001 - the runners' own calls say what is wrong
            return None
        # A large output is scaled only: a shift of the mean turned a TF32 GEMM's cancellations
        # into errors beyond the tolerance (level2/9 on the H200), and scaling alone
        # moves a normalization's statistic as well.
        self.small = needles.small([b[0] for b in self.base if b is not None])
        for mild in (False, True) if self.small else (True,):
            self.mild = mild
            shifted = self.next(x, in_place=True)
            if shifted is not None:
                return self._with_outliers(draw, shifted)
            x = draw()
        self.mild = None
        return None

    def _with_outliers(self, draw: Callable[[], list], shifted: list) -> list:
        """A fresh draw shifted with outliers planted, when the outputs are small and the
        reference shows them (needles.py) on one of ``CALIBRATIONS`` shifts; else ``shifted``.
        One shift was not enough: where it moved a hinge loss's predictions and targets to the
        same sign, its clamp took every outlier in, and one job in 25 planted none (a sample
        of every other row then passed: CI, stop 34)."""
        if not self.small:
            return shifted
        # the judge's own copy: a later draw may be staged where these inputs are
        # (Judge.stage), and ``shifted`` stays the answer where no later shift is taken
        shifted = [v.clone() if torch.is_tensor(v) else v for v in shifted]
        for _ in range(CALIBRATIONS):
            try:
                self.scale = needles.calibrate(self._run, shifted, self.grads)
            except Exception:  # noqa: BLE001 - no outliers for a reference that cannot take them
                return shifted
            if self.scale:
                return self.next(draw(), in_place=True) or shifted
            shifted = self.next(draw(), in_place=True) or shifted
        return shifted

    def next(self, x: list, outliers: bool = True, in_place: bool = False) -> list | None:
        """``x`` under a fresh shift of the kind decided (with outliers planted, if any are and
        ``outliers``), or None where the reference does not take it. ``in_place``: the list
        ``x`` and its floating tensors are moved themselves, and returned (spoiled when None
        is returned: the caller draws again)."""
        if self.mild is None:
            return None
        n = len(x) - self.grads
        # two inputs of one storage are each moved once, into new tensors
        shifted = apply(_params(x[:n], self.mild), x[:n], in_place and _distinct(x[:n]))
        if self.scale and outliers:
            needles.plant(shifted, self.scale)
        shifted += x[n:]
        if in_place:  # the caller's list, now of the moved tensors
            x[:] = shifted
            shifted = x
        try:
            out = self._run(shifted)
        except Exception:  # noqa: BLE001 - not a domain this reference takes
            return None
        taken = _takes(self.base, out)
        del out  # the judge's own outputs go before the runners' calls
        return shifted if taken else None

    def unplanted(self, x: list) -> str | None:
        """Why no outliers were planted where floating inputs ``x`` had room for them and a
        sample of those inputs could stand in for them all, or None. A backward task's outputs
        count its gradients: large, they get none, however small its forward's outputs (a mean
        over a sample with an exact gradient passed unflagged)."""
        if self.scale or not any(torch.is_tensor(v) and v.is_floating_point() for v in x):
            return None
        if self.small:
            return "the reference takes none that move its outputs"
        forward = [b[0] for b in self.base[: self.grads] if b is not None]
        if self.grads and forward and needles.small(forward):
            return "a backward task's gradients are large outputs, which get none"
        return None

    def inputs(self, outliers: bool = True) -> str:
        """What a shifted call runs on, for its messages."""
        planted = self.scale and outliers
        return "scaled and shifted inputs" + (" with outliers planted" if planted else "")

    def _run(self, x: list) -> list:
        if self.grads:
            n = len(x) - self.grads
            return gradients.training_step(self.model, x[:n], x[n:])
        with torch.no_grad():
            return as_list(self.model(*x))


def _distinct(x: list) -> bool:
    """No two tensors of ``x`` share memory (so each can be moved where it is)."""
    ptrs = [v.untyped_storage().data_ptr() for v in x if torch.is_tensor(v) and v.numel()]
    return len(ptrs) == len(set(ptrs))


def _finite(out) -> tuple | None:
    """What ``_takes`` needs of an output: None for a non-tensor, else its shape and True when
    all of it is finite (the usual case: no copy of a large output is kept), else where it is."""
    if not torch.is_tensor(out):
        return None
    return out.shape, True if all_finite(out) else torch.isfinite(out)


def all_finite(t: torch.Tensor) -> bool:
    """Whether every element of ``t`` is finite, a slice at a time where ``t`` is contiguous
    (a mask of the whole of a large output was a quarter of it again)."""
    if not t.is_contiguous():
        return bool(torch.isfinite(t).all())
    flat = t.view(-1)
    return all(
        bool(torch.isfinite(flat[i : i + CHUNK]).all()) for i in range(0, flat.numel(), CHUNK)
    )


def _takes(base: list, out: list) -> bool:
    """The shifted outputs have the shapes of the first ones, and are finite wherever those
    were."""
    if len(base) != len(out):
        return False
    for b, o in zip(base, out, strict=True):
        if b is None:
            continue
        shape, finite = b
        if not torch.is_tensor(o) or o.shape != shape:
            return False
        if finite is True and not all_finite(o):
            return False
        if finite is not True and bool((finite & ~torch.isfinite(o)).any()):
            return False
    return True
