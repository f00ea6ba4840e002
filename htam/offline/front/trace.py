"""Trace a task's reference ``Model`` and record every node's value (shape and dtype).

The recorded values (shapes, dtypes, tuple outputs) let the matcher check broadcasting and
reductions against what PyTorch actually computed instead of re-deriving PyTorch's rules. All of
it runs on fake tensors: an unmodified KernelBench file is the large size (gigabytes of inputs),
and matching needs shapes, not numbers.
"""

from __future__ import annotations

import types
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.fx as fx
from torch._subclasses.fake_tensor import FakeTensorMode

from htam.offline.front.attrs import AttrMarks, mark_attributes
from htam.offline.front.concrete import concrete_trace
from htam.tasks.module import load_task_module
from htam.tasks.task import Task


class NoMatch(Exception):
    """The task does not fit any template; the message says why, for the user."""


class Unbuildable(NoMatch):
    """The reference itself cannot be built here (no template can be checked against it)."""


@dataclass
class Traced:
    module: types.ModuleType  # the executed task source (small size)
    model: torch.nn.Module
    graph: fx.GraphModule
    values: dict[fx.Node, Any]  # what each node produced on the example inputs
    inputs: list[Any]
    # the graph's constants that are float attributes of the model (front/attrs.py)
    marks: AttrMarks = field(default_factory=AttrMarks)
    # traced with concrete input sizes (front/concrete.py): its printed code would freeze them
    concrete: bool = False


class _Recorder(fx.Interpreter):
    def __init__(self, gm: fx.GraphModule):
        super().__init__(gm)
        self.values: dict[fx.Node, Any] = {}

    def run_node(self, n: fx.Node) -> Any:
        out = super().run_node(n)
        self.values[n] = out
        return out


def trace_task(task: Task) -> Traced:
    """Build the reference at the small size (seed 0, caller's RNG untouched) and trace it."""
    with torch.random.fork_rng(devices=[]), FakeTensorMode(allow_non_fake_inputs=True):
        torch.manual_seed(0)
        try:
            module = load_task_module(task.source, "small", name="htam_offline_ref")
            model = module.Model(*module.get_init_inputs())
            inputs = list(module.get_inputs())
        except Exception as err:  # foreign code: any failure is a non-match
            # a missing package fails the candidate too; anything else may be fake tensors' limit
            kind = Unbuildable if isinstance(err, ImportError) else NoMatch
            raise kind(f"the reference cannot be built: {type(err).__name__}: {err}") from err
        concrete = False
        try:
            gm = fx.symbolic_trace(model)
        except Exception as err:  # fx raises many types for untraceable code
            try:  # Python code reading sizes: trace again with the inputs' sizes concrete
                gm, concrete = concrete_trace(model, inputs), True
            except Exception:  # noqa: BLE001 - the symbolic trace's reason is the one to give
                raise NoMatch(
                    f"torch.fx cannot trace the reference: {type(err).__name__}: {err}"
                ) from err
        recorder = _Recorder(gm)
        with torch.no_grad():
            try:
                recorder.run(*inputs)
            except Exception as err:
                raise NoMatch(f"the traced reference fails to run: {err}") from err
        marks = mark_attributes(model, gm)
    return Traced(module, model, gm, recorder.values, inputs, marks, concrete)
