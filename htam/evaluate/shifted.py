"""One more trial, on inputs the task's ``get_inputs`` never draws, where a statistic of its
distribution can stand in for the work.

A loss over a billion elements is concentrated: on every draw of KernelBench's 100_HingeLoss
(predictions uniform in [0, 1), targets +-1) it is 1 - 0.5 * mean(targets) to within 1e-5, and
a C++ candidate that read only the targets passed every trial at 86x (red team 5; 95_CrossEntropy
too, at 168x). Fresh draws of the same distribution cannot tell such a shortcut from the work.

So when the outputs are small (a loss, a reduction to a few values), the judge runs one trial on
inputs scaled and shifted per tensor (``x * a + b * std(x)``: a in [1/3, 3], b in [-1, 1]), which
moves every such statistic. A task whose reference cannot take them (a probability input that
must stay in [0, 1], a logarithm of a shifted value) gets a milder shift, scaling only (a in
[0.5, 1]); where the reference cannot take that either (it raises, or returns a non-finite value
where it returned a finite one), there is no such trial. The judge decides this on its own copy of
the reference before either runner sees the inputs.

A candidate that counted its calls could do the work on the trials and take the shortcut on the
timed calls, whose inputs come from the task's distribution. So every timed call's fresh inputs
are shifted, each time with fresh a and b (checked on the judge's copy again): the comparison of
every timed output then catches a shortcut on any of them, and no one shift can be learned from
one call and reused. (Shifting half of them in secret left the other half to a candidate that
told shifted inputs apart: red team 6.) What remains possible: a candidate that samples its
inputs to estimate their distribution before taking the shortcut (docs/evaluator.md).
"""

from __future__ import annotations

import math

import torch

from htam.evaluate.trusted_jobs import as_list, build

MAX_OUTPUT = 1 << 16  # elements over all outputs


def applies(outputs: list) -> bool:
    """Small floating outputs only: elementwise outputs carry each element's own work."""
    tensors = [t for t in outputs if torch.is_tensor(t)]
    return (
        bool(tensors)
        and all(t.is_floating_point() for t in tensors)
        and sum(t.numel() for t in tensors) <= MAX_OUTPUT
    )


Shift = list  # per input: (a, b) for a floating tensor, None for anything else


def _params(x: list, gen: torch.Generator, mild: bool) -> Shift:
    out = []
    for v in x:
        if not (torch.is_tensor(v) and v.is_floating_point() and v.numel()):
            out.append(None)
            continue
        u = torch.rand(2, generator=gen).tolist()
        if mild:
            out.append((0.5 + 0.5 * u[0], 0.0))
            continue
        spread = float(v.float().std()) if v.numel() > 1 else 1.0
        spread = spread if math.isfinite(spread) and spread > 0 else 1.0
        out.append((math.exp(math.log(3.0) * (2 * u[0] - 1)), (2 * u[1] - 1) * spread))
    return out


def apply(shift: Shift, x: list) -> list:
    """``x`` with each floating tensor scaled and shifted as ``shift`` says (new tensors)."""
    return [v if ab is None else v * ab[0] + ab[1] for ab, v in zip(shift, x, strict=True)]


class Shifter:
    """Draws shifts of a call's inputs that the judge's own copy of the reference takes: the
    first decides between the strong and the mild kind, each later one is fresh (one shift kept
    for the job was learned from the shifted trial and answered without the work: red team
    5b, 223x)."""

    def __init__(self, module, init_args: list, seed: int, device: str, secret: int):
        self.gen = torch.Generator().manual_seed(secret)
        self.made = (module, init_args, seed, device)
        self.model = None
        self.base: list = []  # the reference's outputs on the first unshifted inputs
        self.mild: bool | None = None  # the kind that the reference takes

    def first(self, x: list) -> list | None:
        """``x`` shifted, deciding the kind; None when the reference takes neither."""
        try:
            module, init_args, seed, device = self.made
            self.model = build(module.Model, init_args, seed, device)
            self.base = self._run(x)
        except Exception:  # noqa: BLE001 - the runners' own calls say what is wrong
            return None
        for mild in (False, True):
            self.mild = mild
            shifted = self.next(x)
            if shifted is not None:
                return shifted
        self.mild = None
        return None

    def next(self, x: list) -> list | None:
        """``x`` under a fresh shift of the kind decided, or None where the reference does not
        take it."""
        if self.mild is None:
            return None
        shifted = apply(_params(x, self.gen, self.mild), x)
        try:
            out = self._run(shifted)
        except Exception:  # noqa: BLE001 - not a domain this reference takes
            return None
        return shifted if _takes(self.base, out) else None

    def _run(self, x: list) -> list:
        with torch.no_grad():
            return as_list(self.model(*x))


def _takes(base: list, out: list) -> bool:
    if len(base) != len(out):
        return False
    for b, o in zip(base, out, strict=True):
        if torch.is_tensor(b):
            if not torch.is_tensor(o) or o.shape != b.shape:
                return False
            if bool((torch.isfinite(b) & ~torch.isfinite(o)).any()):
                return False
    return True
