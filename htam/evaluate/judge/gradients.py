"""Backward tasks (Robust-KBench's ``func_backward.py``, ``HTAM_KIND = 'backward'`` in the task
source): what counts is the gradients, so one call of such a task is a training step.

``training_step(model, inputs, grad_outputs)`` runs the forward on inputs that require grad, then
the backward of its floating outputs against ``grad_outputs`` with respect to those
inputs and then the model's parameters (in registration order), and returns the forward's
outputs followed by every gradient: the judge compares them all, like any outputs, at every
trial and configuration. ``grad_outputs`` are drawn by the judge from its secret seed and lent
like the inputs, so a candidate cannot know them ahead of the call.

The step is timed whole, forward and backward: timing the backward alone would reward moving
its work into an untimed forward (a candidate that computes whatever it can while the inputs are
at hand). The reference's eager and torch.compile times are of the same step.
"""

from __future__ import annotations

import torch


def is_backward(module) -> bool:
    """Whether the loaded task module is a backward task."""
    return getattr(module, "HTAM_KIND", "forward") == "backward"


def _as_list(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _wants_grad(x) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex())


def training_step(model, inputs: list, grad_outputs: list) -> list[torch.Tensor]:
    """The forward's outputs, then d(outputs . grad_outputs)/d(floating inputs, parameters). A
    parameter or input the outputs do not depend on gets a zero gradient, as ``.grad`` would
    read after ``zero_grad``; the outputs are detached (they are compared, not trained)."""
    xs = [x.detach().requires_grad_() if _wants_grad(x) else x for x in inputs]
    outs = _as_list(model(*xs))
    params = list(model.parameters()) if isinstance(model, torch.nn.Module) else []
    wrt = [x for x in xs if _wants_grad(x)] + [p for p in params if p.requires_grad]
    diff = [o for o in outs if _wants_grad(o)]
    if len(diff) != len(grad_outputs):
        raise ValueError(
            f"{len(diff)} floating outputs, expected {len(grad_outputs)} (one per gradient)"
        )
    if any(not o.requires_grad for o in diff):
        raise ValueError("an output does not require grad: the backward pass is not connected")
    for w in wrt:
        w.grad = None
    # backward(inputs=...) rather than autograd.grad: the flop counter's module hooks refuse
    # the latter; .grad of exactly ``wrt`` is filled, then taken back out of the parameters
    torch.autograd.backward(diff, grad_outputs, inputs=wrt)
    grads = [torch.zeros_like(w) if w.grad is None else w.grad for w in wrt]
    for w in wrt:
        w.grad = None
    return [o.detach() for o in outs] + grads


def output_specs(model, inputs: list) -> list[tuple[list[int], torch.dtype]]:
    """Shapes and dtypes of the floating outputs of a forward: the gradients a step takes."""
    with torch.no_grad():
        outs = _as_list(model(*inputs))
    return [(list(o.shape), o.dtype) for o in outs if _wants_grad(o)]


def draw_grad_outputs(specs: list, seed: int, device: str) -> list[torch.Tensor]:
    """One ``grad_output`` per floating output, standard normal, from ``seed``."""
    generator = torch.Generator(device=device).manual_seed(seed)
    return [torch.randn(shape, dtype=dtype, device=device, generator=generator)
            for shape, dtype in specs]  # fmt: skip
