"""Check a rewritten model before any code is written for it: run it on fake tensors (shapes
only, as the trace does) with each kernel primitive stood in by a counter, so that a match
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
from htam.tasks.module import load_task_module

# The primitives' signatures (triton_rt, cpp_rt), each counting its call and giving a result of
# the right shape.
_STANDINS = """
_CALLS = []


def _act(x, spec, inplace=False):
    _CALLS.append("act")
    return x if inplace else torch.empty_like(x)


def _affine_act(x, scale, shift, channels, inner, spec, out=None):
    _CALLS.append("affine_act")
    return torch.empty_like(x) if out is None else out


def _bias_act(y, bias, inner, spec):
    _CALLS.append("bias_act")
    return y


def _bn_train(x, channels, inner, weight, bias, eps, running_mean, running_var, momentum):
    _CALLS.append("bn_train")
    return x.new_ones(channels), x.new_zeros(channels)


def _rows(x, mode, weight=None, bias=None, eps=0.0):
    _CALLS.append("rows")
    return torch.empty_like(x)


def _lstm_cell(gx, gh, c, h, out):
    _CALLS.append("lstm_cell")


def _gru_cell(gx, gh, h, out):
    _CALLS.append("gru_cell")


_FUSE = True
"""


def dry_run(rw: Rewritten, source: str) -> list[str]:
    """The primitives the rewritten model's forward calls, on the task's small inputs."""
    code = "\n".join(
        ["import math", "import torch", "import torch.nn as nn", "import torch.nn.functional as F",
         rw.imports, _STANDINS, RUNTIME, RECURRENT, rw.source]
    )  # fmt: skip
    with torch.random.fork_rng(devices=[]), FakeTensorMode(allow_non_fake_inputs=True):
        torch.manual_seed(0)
        try:
            task = load_task_module(source, "small", name="htam_offline_dry_ref")
            module = types.ModuleType("htam_offline_dry")
            exec(compile(code, "<htam whole model>", "exec"), module.__dict__)  # noqa: S102
            model = module.ModelNew(*task.get_init_inputs())
            with torch.no_grad():
                model(*task.get_inputs())
        except Exception as err:  # foreign code on fake tensors: any failure is a non-match
            raise NoMatch(
                f"the rewritten model does not run on fake tensors: {type(err).__name__}: {err}"
            ) from err
    return list(module._CALLS)
