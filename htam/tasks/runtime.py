"""Build a task's reference model and inputs at a chosen size, reproducibly."""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from typing import Any

import torch

from htam.tasks.module import Size, exec_task_source, extra_configs, load_task_module
from htam.tasks.task import Task


class StageError(Exception):
    """A task's own code failed before its forward: building the model (``get_init_inputs()``
    and ``Model(...)``) or its inputs (``get_inputs()``), so that a message names which."""

    def __init__(self, stage: str, error: BaseException):
        text = traceback.format_exception_only(type(error), error)[-1]
        self.stage, self.cause = stage, " ".join(text.split())[:300]
        super().__init__(f"{stage} failed: {self.cause}")


def _staged(stage: str, staged: bool, build: Callable[[], Any]) -> Any:
    if not staged:
        return build()
    try:
        return build()
    except Exception as error:  # the task's own code, whatever it raised
        raise StageError(stage, error) from error


def num_extra(task: Task) -> int:
    """How many extra (correctness-only) configurations the task declares."""
    return len(extra_configs(exec_task_source(task.source, _module_name(task))))


def instantiate(
    task: Task,
    size: Size = "small",
    extra: int | None = None,
    seed: int = 0,
    device: str = "cpu",
    staged: bool = False,
) -> tuple[torch.nn.Module, list[Any]]:
    """The reference ``Model`` and its inputs for ``size`` (and extra configuration ``extra``).

    Weights come from ``get_init_inputs``/``Model`` under ``torch.manual_seed(seed)`` and inputs
    from ``get_inputs`` under the same seed, both built on the CPU (so values do not depend on
    the device's random generator) and then moved to ``device``. On ``"meta"`` they are built
    there directly: only shapes matter, and large sizes then cost no memory. With ``staged``
    a failure of the task's code is a ``StageError`` naming the function that failed.
    """
    module = load_task_module(task.source, size, extra, name=_module_name(task))
    build_device = "meta" if device == "meta" else "cpu"
    with torch.device(build_device):
        torch.manual_seed(seed)
        model = _staged(
            "building the model (get_init_inputs(), Model(...))",
            staged,
            lambda: module.Model(*module.get_init_inputs()),
        )
        torch.manual_seed(seed)
        inputs = _staged("get_inputs()", staged, lambda: _input_list(module.get_inputs()))
    if device != build_device:
        model = model.to(device)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in inputs]
    return model, inputs


def _input_list(value: Any) -> list[Any]:
    """``get_inputs()``'s value as the forward's arguments: a list or tuple, never an iterable
    that ``list`` would spread (a string became one argument per letter)."""
    if not isinstance(value, list | tuple):
        raise TypeError(
            f"get_inputs() returns {type(value).__name__}: it must return a list (or tuple) of "
            "the forward's arguments"
        )
    return list(value)


def tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a (possibly nested) output or input structure, in order."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from tensors(item)


def nbytes(value: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tensors(value))


def _module_name(task: Task) -> str:
    # A readable name in tracebacks of the task's own code.
    return "htam_task_" + "".join(c if c.isalnum() else "_" for c in task.name)
