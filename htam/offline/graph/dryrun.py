"""Check a rewritten model before any code is written for it: run it on fake tensors (shapes
only, as the trace does; real ones at the small size where fake ones cannot) with each kernel primitive stood in by a counter, so that a match
means the model builds, its forward runs, and at least one of our kernels is on its data path
(a ReLU module built but never called is no segment)."""

from __future__ import annotations

import types

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

from htam.offline.front.trace import NoMatch
from htam.offline.graph.recurrent import RECURRENT
from htam.offline.graph.rewrite import Rewritten
from htam.offline.graph.runtime import RUNTIME
from htam.offline.guard import input_checks
from htam.tasks.module import load_task_module

# The primitives' signatures (triton_rt, cpp_rt), each counting its call and giving a result of
# the right shape.
_STANDINS = """
_CALLS = []
_DTYPES = set()  # what the kernels would be handed: they compute in float32 only


def _act(x, spec, inplace=False):
    _CALLS.append("act")
    _DTYPES.add(x.dtype)
    return x if inplace else torch.zeros_like(x)


def _affine_act(x, scale, shift, channels, inner, spec, out=None):
    _CALLS.append("affine_act")
    _DTYPES.add(x.dtype)
    return torch.zeros_like(x) if out is None else out


def _bias_act(y, bias, inner, spec):
    _CALLS.append("bias_act")
    _DTYPES.add(y.dtype)
    return y


def _bn_train(x, channels, inner, weight, bias, eps, running_mean, running_var, momentum):
    _CALLS.append("bn_train")
    _DTYPES.add(x.dtype)
    return x.new_ones(channels), x.new_zeros(channels)


def _rows(x, mode, weight=None, bias=None, eps=0.0):
    _CALLS.append("rows")
    _DTYPES.add(x.dtype)
    return torch.zeros_like(x)


def _lstm_cell(gx, gh, c, h, out):
    _CALLS.append("lstm_cell")
    _DTYPES.add(gx.dtype)


def _gru_cell(gx, gh, h, out):
    _CALLS.append("gru_cell")
    _DTYPES.add(gx.dtype)


_FUSE = True
"""


def dry_run(rw: Rewritten, source: str) -> tuple[list[str], dict]:
    """The primitives the rewritten model's forward calls, on the task's small inputs, and the
    dtypes its forward may be handed (:func:`htam.offline.guard.input_checks`): fake tensors
    first; where those cannot run the model (a value read back in ``__init__``), real ones at
    the small size."""
    code = "\n".join(
        ["import math", "import torch", "import torch.nn as nn", "import torch.nn.functional as F",
         rw.imports, _STANDINS, RUNTIME, RECURRENT, rw.source]
    )  # fmt: skip
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            return _run(code, source)
    except NoMatch:
        raise
    except Exception:  # noqa: BLE001 - fake tensors' limits: the real run below decides
        pass
    try:
        return _run(code, source)
    except NoMatch:
        raise
    except Exception as err:  # foreign code: any failure is a non-match
        raise NoMatch(f"the rewritten model does not run: {type(err).__name__}: {err}") from err


def _run(code: str, source: str) -> tuple[list[str], dict]:
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        task = load_task_module(source, "small", name="htam_offline_dry_ref")
        module = types.ModuleType("htam_offline_dry")
        exec(compile(code, "<htam whole model>", "exec"), module.__dict__)  # noqa: S102
        model = module.ModelNew(*task.get_init_inputs())
        _deterministic(model)
        inputs = list(task.get_inputs())
        with torch.no_grad():
            model(*inputs)
    other = sorted(str(d).removeprefix("torch.") for d in module._DTYPES - {torch.float32})
    if other:
        raise NoMatch(
            f"its kernels would get {', '.join(other)} tensors: the templates are float32"
        )
    return list(module._CALLS), input_checks(inputs, model, shapes=False)


def _deterministic(model: torch.nn.Module) -> None:
    """NoMatch for a model that drops values at random (dropout above 0 while training, as
    the reference runs): no candidate can reproduce its outputs."""
    for name, m in model.named_modules():
        random = (isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0) or (
            isinstance(m, torch.nn.RNNBase) and m.dropout > 0 and m.num_layers > 1
        )
        if random:
            raise NoMatch(f"{name or 'the model'} is a dropout in training mode: random outputs")
