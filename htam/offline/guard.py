"""What a generated ``ModelNew`` assumes of its inputs, and the check it runs on every call.

The kernels are written for the dtypes, ranks and broadcast pattern of the reference's inputs,
and for the dtypes of its parameters and buffers, and read raw pointers: a float64 tensor (an
input, or a buffer after ``ModelNew.double()``), a tensor on another device or a bias shaped
like its input would give NaNs, float32 numbers or reads past the end, silently. The check
refuses them with a ``TypeError`` or ``ValueError`` that says what was expected (sizes
themselves are free: the kernels read them at run time). Every template's ``ModelNew`` runs
this one check first in its forward (:mod:`htam.offline.source`, :mod:`htam.offline.graph`)."""

from __future__ import annotations

from typing import Any

import torch

# The device each language's kernels run on (triton: any, one device for all inputs).
LANGUAGE_DEVICES = {"cpp": "cpu", "cuda": "cuda"}


def state_dtypes(model: torch.nn.Module) -> list[str]:
    """The floating dtypes of the reference's parameters and buffers, and the default one
    (``ModelNew``'s own attribute buffers): the only ones its kernels may read."""
    found = {str(t.dtype) for t in (*model.parameters(), *model.buffers()) if t.is_floating_point()}
    found.add(str(torch.get_default_dtype()))
    return sorted(d.removeprefix("torch.") for d in found)


def input_checks(inputs: list[Any], model: torch.nn.Module, shapes: bool = True) -> dict:
    """From the traced example inputs: each tensor's dtype and rank by position, which tensors
    had the same shape, and the dims where a tensor was broadcast (1 where another is not);
    from ``model``, the floating dtypes of its state. Without ``shapes`` (the whole-model
    template, whose kernels take the shapes of what they are handed), dtypes only."""
    tensors = {i: t for i, t in enumerate(inputs) if isinstance(t, torch.Tensor)}
    dtypes = {i: str(t.dtype).removeprefix("torch.") for i, t in tensors.items()}
    ranks = {i: t.dim() for i, t in tensors.items()}
    rank = max(ranks.values(), default=0)
    padded = {i: (1,) * (rank - t.dim()) + tuple(t.shape) for i, t in tensors.items()}
    widest = [max((s[d] for s in padded.values()), default=1) for d in range(rank)]
    broadcast = {
        i: [d - (rank - t.dim()) for d in range(rank - t.dim(), rank)
            if padded[i][d] == 1 and widest[d] > 1]
        for i, t in tensors.items()
    }  # fmt: skip
    same = [[j for j in tensors if tensors[j].shape == t.shape] for t in tensors.values()]
    if not shapes:
        return {"dtypes": dtypes, "state": state_dtypes(model)}
    return {
        "dtypes": dtypes,
        "state": state_dtypes(model),
        "ranks": ranks,
        "broadcast": {i: dims for i, dims in broadcast.items() if dims},
        "same_shape": sorted({tuple(g) for g in same if len(g) > 1}),
    }


def check_call(inputs: list[str], checks: dict, language: str) -> str:
    """The first line of every generated ``forward``: the check of its arguments ``inputs``
    and of the module's state against ``checks`` (:func:`input_checks`)."""
    if not checks:
        raise ValueError("a generated ModelNew needs its input checks (htam.offline.guard)")
    args = f"({', '.join(inputs)},)" if inputs else "()"
    device = LANGUAGE_DEVICES.get(language)
    return f"_checked_inputs(self, {args}, {checks!r}, {device!r})"


# The helper a solution file carries (``htam.offline.source``); it must run without htam.
CHECK_HELPER = '''
def _checked_inputs(module, inputs, checks, device):
    """This ModelNew's kernels were written for the reference's dtypes, ranks and broadcast
    pattern, for its parameters' and buffers' dtypes (and for ``device``): other inputs and
    state are refused, never computed wrongly."""
    for i, dtype in checks["dtypes"].items():
        x = inputs[i]
        where = f"ModelNew input {i}"
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{where}: expected a tensor, got {type(x).__name__}")
        if str(x.dtype).removeprefix("torch.") != dtype:
            raise TypeError(
                f"{where} is {x.dtype}: these kernels compute in {dtype} only "
                f"(use the reference Model for other dtypes, or optimize the task for it)"
            )
        if i in checks.get("ranks", {}) and x.dim() != checks["ranks"][i]:
            raise ValueError(f"{where} has {x.dim()} dims: the kernels expect {checks['ranks'][i]}")
        if device is not None and x.device.type != device:
            raise ValueError(f"{where} is on {x.device}: the kernels run on {device}")
        for d in checks.get("broadcast", {}).get(i, ()):
            if x.shape[d] != 1:
                raise ValueError(
                    f"{where} has size {x.shape[d]} in dim {d}: the kernels broadcast it (size 1)"
                )
    for group in checks.get("same_shape", ()):
        if len({tuple(inputs[i].shape) for i in group}) > 1:
            raise ValueError(f"ModelNew inputs {list(group)} must have one shape, as the kernels assume")
    devices = {x.device for x in inputs if isinstance(x, torch.Tensor)}
    if len(devices) > 1:
        raise ValueError("ModelNew inputs are on several devices: the kernels need one")
    allowed = {getattr(torch, d) for d in checks["state"]}
    for m in module.modules():  # each forward: a loop over tensors, no names until one fails
        for t in (*m._parameters.values(), *m._buffers.values()):
            if t is None:
                continue
            dtype_ok = t.dtype in allowed or not t.is_floating_point()
            elsewhere = (device is not None and t.device.type != device) or (
                bool(devices) and t.device not in devices
            )
            if dtype_ok and not elsewhere:
                continue
            state = [*module.named_parameters(), *module.named_buffers()]
            where = "ModelNew's " + next(n for n, u in state if u is t)
            if not dtype_ok:
                raise TypeError(
                    f"{where} is {t.dtype}: these kernels compute in "
                    f"{' or '.join(checks['state'])} only (use the reference Model for other "
                    f"dtypes, or optimize the task for it)"
                )
            raise ValueError(f"{where} is on {t.device}: the kernels run on {device or devices.pop()}")
'''
