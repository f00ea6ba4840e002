"""What a generated ``ModelNew`` assumes of its inputs, and the check it runs on every call.

The kernels are written for the dtypes, ranks and broadcast pattern of the reference's inputs,
and read raw pointers: a float64 tensor, a tensor on another device or a bias shaped like its
input would give NaNs, float32 numbers or reads past the end, silently. The check refuses them
with a ``TypeError`` or ``ValueError`` that says what was expected (sizes themselves are free:
the kernels read them at run time)."""

from __future__ import annotations

from typing import Any

import torch

# The device each language's kernels run on (triton: any, one device for all inputs).
LANGUAGE_DEVICES = {"cpp": "cpu", "cuda": "cuda"}


def input_checks(inputs: list[Any]) -> dict:
    """From the traced example inputs: each tensor's dtype and rank by position, which tensors
    had the same shape, and the dims where a tensor was broadcast (1 where another is not)."""
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
    return {
        "dtypes": dtypes,
        "ranks": ranks,
        "broadcast": {i: dims for i, dims in broadcast.items() if dims},
        "same_shape": sorted({tuple(g) for g in same if len(g) > 1}),
    }


# The helper a solution file carries (``htam.offline.source``); it must run without htam.
CHECK_HELPER = '''
def _checked_inputs(inputs, checks, device):
    """This ModelNew's kernels were written for the reference's dtypes, ranks and broadcast
    pattern (and for ``device``): other inputs are refused, never computed wrongly."""
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
        if x.dim() != checks["ranks"][i]:
            raise ValueError(f"{where} has {x.dim()} dims: the kernels expect {checks['ranks'][i]}")
        if device is not None and x.device.type != device:
            raise ValueError(f"{where} is on {x.device}: the kernels run on {device}")
        for d in checks["broadcast"].get(i, ()):
            if x.shape[d] != 1:
                raise ValueError(
                    f"{where} has size {x.shape[d]} in dim {d}: the kernels broadcast it (size 1)"
                )
    for group in checks["same_shape"]:
        if len({tuple(inputs[i].shape) for i in group}) > 1:
            raise ValueError(f"ModelNew inputs {list(group)} must have one shape, as the kernels assume")
    if len({x.device for x in inputs if isinstance(x, torch.Tensor)}) > 1:
        raise ValueError("ModelNew inputs are on several devices: the kernels need one")
'''
