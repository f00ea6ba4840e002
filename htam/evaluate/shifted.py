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
timed calls, whose inputs come from the task's distribution. So each timed call's fresh inputs
get the same shift with probability 1/2, drawn in secret: the comparison of every timed output
then catches a shortcut on any of them. What remains possible: a candidate that samples its
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


def draw(module, init_args: list, seed: int, device: str, x: list, secret: int) -> Shift | None:
    """A shift of ``x`` the reference takes, or None."""
    gen = torch.Generator().manual_seed(secret)
    try:
        model = build(module.Model, init_args, seed, device)
        with torch.no_grad():
            base = as_list(model(*x))
    except Exception:  # noqa: BLE001 - the runners' own calls say what is wrong
        return None
    for mild in (False, True):
        shift = _params(x, gen, mild)
        try:
            with torch.no_grad():
                out = as_list(model(*apply(shift, x)))
        except Exception:  # noqa: BLE001 - not a domain this reference takes: try milder
            continue
        if _takes(base, out):
            return shift
    return None


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
