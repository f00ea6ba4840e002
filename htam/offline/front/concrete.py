"""The fallback trace for a reference that ``torch.fx.symbolic_trace`` cannot follow because
Python code reads sizes (``len(weight.shape)``, ``tuple(x.shape[-3:])``: Robust-KBench's
layernorm). The inputs' ``shape`` is then their concrete size and parameters' shapes are
constants (``param_shapes_constant``), so Python can take lengths and slices; every size read
from an input stays marked (:class:`SizeInt`, also through arithmetic), and the lowering turns
it into the same :class:`~htam.offline.front.lower.ShapeVal` a symbolic trace yields: fine as
structure (how many dims), refused where it would freeze the traced size. A graph from this
trace cannot be printed as torch code (its sizes are literals there): ``Traced.concrete``.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.fx as fx


class SizeInt(int):
    """A size read from an input in the concrete-shape trace; arithmetic keeps the mark."""

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return SizeInt(value)
        return SizeFloat(value) if isinstance(value, float) else value


class SizeFloat(float):
    """A quotient of sizes in the concrete-shape trace (``x.shape[1] / 2``)."""


def _marked(name: str):
    def op(self, *args):
        return SizeInt._wrap(self, getattr(int, name)(self, *args))

    return op


def _branch(self, *args):
    raise TypeError(
        "a size compared or tested in Python (control flow on a shape): the concrete-size "
        "trace would keep only the traced size's branch"
    )


for _form in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "__bool__"):
    setattr(SizeInt, _form, _branch)
SizeInt.__hash__ = int.__hash__  # type: ignore[method-assign]

for _name in ("add", "sub", "mul", "floordiv", "truediv", "mod", "pow", "neg", "abs", "pos"):
    for _form in (f"__{_name}__", f"__r{_name}__"):
        if hasattr(int, _form):
            setattr(SizeInt, _form, _marked(_form))


class SizeTuple(tuple):
    """An input's concrete shape: indexing and slicing keep the marks."""

    def __getitem__(self, key):
        value = super().__getitem__(key)
        return SizeTuple(value) if isinstance(key, slice) else value


def marked(value: Any) -> bool:
    """Whether ``value`` is (or holds) a size of the concrete-shape trace."""
    if isinstance(value, SizeInt | SizeFloat):
        return True
    return isinstance(value, (tuple, list)) and any(marked(v) for v in value)


class _ShapeProxy(fx.Proxy):
    """An input's proxy whose ``shape`` (and ``size()``) is its concrete, marked size."""

    def __getattr__(self, key: str) -> Any:
        sizes = self.__dict__.get("_htam_sizes")
        if key == "shape" and sizes is not None:
            return sizes
        if key == "size" and sizes is not None:
            return lambda dim=None: sizes if dim is None else sizes[dim]
        return super().__getattr__(key)


class _ConcreteShapes(fx.Tracer):
    def __init__(self, shapes: list[tuple[int, ...] | None]):
        super().__init__(param_shapes_constant=True)
        self.shapes = list(shapes)

    def proxy(self, node: fx.Node) -> fx.Proxy:
        if node.op != "placeholder" or not self.shapes:
            return super().proxy(node)
        shape = self.shapes.pop(0)
        if shape is None:
            return super().proxy(node)
        p = _ShapeProxy(node, self)
        p.__dict__["_htam_sizes"] = SizeTuple(SizeInt(n) for n in shape)
        return p


def concrete_trace(model: torch.nn.Module, inputs: list[Any]) -> fx.GraphModule:
    """``model`` traced with its inputs' sizes concrete (and marked); raises what fx raises."""
    shapes = [tuple(x.shape) if isinstance(x, torch.Tensor) else None for x in inputs]
    tracer = _ConcreteShapes(shapes)
    graph = tracer.trace(model)
    return fx.GraphModule(model, graph)
