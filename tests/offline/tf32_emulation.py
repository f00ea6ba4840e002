"""A whole-model candidate against its reference at the full size on the CPU, with cuDNN's TF32
convolutions emulated: how docs/offline.md's "Deep batch-normed networks on a GPU" was measured.

The Triton interpreter is far too slow for a full-size ResNet, so the candidate's primitives
(``_act``, ``_affine_act``, ``_bn_train``, ``_rows``) are replaced by torch code doing the same
arithmetic (the batch norm's moments shifted by each channel's first element, the variance as
``s2/n - d^2``); the candidate's own modules, rewrites and library calls run as generated. TF32
is emulated by rounding each convolution's input and weight to a 10-bit mantissa (round to
nearest), as tensor cores read them; products and sums stay float32.

    python3 -m tests.offline.tf32_emulation 10_ResNet101 [19_MobileNetV1 ...]   # KB_ROOT

For each task: the candidate and the reference on a one-ulp nudged input, each against the
reference, by the evaluator's comparison, with IEEE and with TF32 convolutions.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

from htam.evaluate.eval_config import TOLERANCES
from htam.evaluate.judge.compare import compare_tensor
from htam.tasks.module import load_task_module
from tests.offline.harness import load_solution, solution, task_of

_ACTS = {
    0: lambda v, lo, hi: v,
    1: lambda v, lo, hi: torch.relu(v),
    2: lambda v, lo, hi: torch.sigmoid(v),
    3: lambda v, lo, hi: torch.tanh(v),
    4: lambda v, lo, hi: F.gelu(v),
    5: lambda v, lo, hi: F.gelu(v, approximate="tanh"),
    6: lambda v, lo, hi: F.silu(v),
    7: lambda v, lo, hi: v.clamp(lo, hi),
    8: lambda v, lo, hi: F.leaky_relu(v, lo),
    9: lambda v, lo, hi: v.exp(),
}


def _act(x, spec, inplace=False):
    y = _ACTS[spec[0]](x, spec[1], spec[2])
    if inplace:
        return x.copy_(y)
    return y.clone() if y is x else y


def _affine_act(x, scale, shift, channels, inner, spec, out=None):
    v = x.reshape(-1, channels, inner)
    if scale is not None:
        v = v * scale.view(channels, 1)
    v = _ACTS[spec[0]](v + shift.view(channels, 1), spec[1], spec[2]).reshape(x.shape)
    return v if out is None else out.copy_(v)


def _bn_train(x, channels, inner, weight, bias, eps, running_mean, running_var, momentum):
    xc = x.reshape(-1, channels, inner).transpose(0, 1).reshape(channels, -1)
    n = xc.shape[1]
    d = xc - xc[:, :1]
    dm = d.sum(1) / n
    var = ((d * d).sum(1) / n - dm * dm).clamp(min=0.0)
    mean = xc[:, 0] + dm
    scale = torch.rsqrt(var + eps) if weight is None else torch.rsqrt(var + eps) * weight
    shift = -mean * scale if bias is None else bias - mean * scale
    if running_mean is not None:
        running_mean.mul_(1 - momentum).add_(momentum * mean)
        running_var.mul_(1 - momentum).add_(momentum * var * n / max(n - 1, 1))
    return scale, shift


def _rows(x, mode, weight=None, bias=None, eps=0.0):
    if mode == 0:
        return torch.softmax(x, -1)
    if mode == 1:
        return torch.log_softmax(x, -1)
    return F.layer_norm(x, x.shape[-1:], weight, bias, eps)


def emulate(module) -> None:
    """The candidate module's primitives as torch code (its input guard off: CPU tensors)."""
    for fn in (_act, _affine_act, _bn_train, _rows):
        setattr(module, fn.__name__, fn)
    module._checked_inputs = lambda *args, **kwargs: None


def tf32(t: torch.Tensor) -> torch.Tensor:
    """``t`` rounded to TF32's 10-bit mantissa (to nearest), kept in float32."""
    bits = t.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


_CONVS = ("conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d")


@contextlib.contextmanager
def tf32_convolutions():
    """Every ``F.conv*`` (torch's modules call them) reading TF32-rounded inputs and weights."""
    saved = {name: getattr(F, name) for name in _CONVS}

    def rounded(fn):
        return lambda x, w, *args, **kwargs: fn(tf32(x), tf32(w), *args, **kwargs)

    try:
        for name, fn in saved.items():
            setattr(F, name, rounded(fn))
        yield
    finally:
        for name, fn in saved.items():
            setattr(F, name, fn)


def compare_at_full_size(source: str) -> dict[str, str]:
    """The candidate and the reference on the input nudged one ulp up, each against the
    reference (evaluator's comparison; "ok" when within), with IEEE and TF32 convolutions."""
    ref_mod = load_task_module(source, "large", name="htam_tf32_ref")
    sol = load_solution(solution(task_of("tf32", source), "triton"))
    emulate(sol)
    init = ref_mod.get_init_inputs()
    torch.manual_seed(1)
    inputs = ref_mod.get_inputs()
    up = [torch.nextafter(x, torch.full_like(x, float("inf"))) for x in inputs]
    rows = {}
    for mode, ctx in (("ieee", contextlib.nullcontext), ("tf32", tf32_convolutions)):
        with ctx(), torch.no_grad():
            outs = []
            for cls, xs in ((ref_mod.Model, inputs), (sol.ModelNew, inputs), (ref_mod.Model, up)):
                torch.manual_seed(0)
                outs.append(cls(*init)(*[x.clone() for x in xs]))
        want, got, nudged = outs
        rows[f"{mode} candidate"] = compare_tensor(got, want, TOLERANCES) or "ok"
        rows[f"{mode} reference one ulp up"] = compare_tensor(nudged, want, TOLERANCES) or "ok"
    return rows


if __name__ == "__main__":
    kb = Path(os.environ.get("KB_ROOT", "/work/shared/kernelbench/KernelBench"))
    torch.set_num_threads(os.cpu_count() or 1)
    for stem in sys.argv[1:]:
        for what, verdict in compare_at_full_size(
            (kb / "level3" / f"{stem}.py").read_text()
        ).items():
            print(f"{stem} {what}: {verdict[:160]}", flush=True)
