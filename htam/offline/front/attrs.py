"""Constructor values as run-time values: which constants of the traced graph are a float
attribute of the model (``self.scaling_factor``), found by tracing a second time with every
float attribute set to a distinct probe value and comparing the two graphs.

A constant that is the attribute is replaced in the graph by an :class:`AttrFloat` (a float
that prints as ``self.<name>``): a library prefix then prints the attribute, and the kernel's
program reads it as an operand (a one-element buffer ``ModelNew`` makes from the attribute).
Any other use of its value (a branch on it, arithmetic folded into a constant, a literal in a
kernel) is recorded in ``baked``: the solution then stays specialized to that value, checked in
``__init__``. A constant computed from an attribute (``self.a * 2`` folded by the trace) marks
the trace ``derived``: every attribute stays checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.fx as fx

_PROBE = 0.000244140625  # 2**-12: probe values stay exact and distinct


class AttrFloat(float):
    """The value of the model's float attribute ``attr``, wherever the graph held it."""

    baked: set[str]
    attr: str

    def __new__(cls, value: float, attr: str, baked: set[str]) -> AttrFloat:
        out = super().__new__(cls, value)
        out.attr, out.baked = attr, baked
        return out

    def __repr__(self) -> str:
        return f"self.{self.attr}"

    def __reduce__(self):
        return (float, (float.__float__(self),))


def _recording(name: str):
    base = getattr(float, name)

    def method(self, *args):
        self.baked.add(self.attr)
        return base(float.__float__(self), *args)

    return method


for _name in (
    "__float__ __int__ __bool__ __hash__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __add__ "
    "__radd__ __sub__ __rsub__ __mul__ __rmul__ __truediv__ __rtruediv__ __floordiv__ "
    "__rfloordiv__ __mod__ __rmod__ __pow__ __rpow__ __neg__ __pos__ __abs__ __round__ "
    "__trunc__ __str__ __format__"
).split():
    setattr(AttrFloat, _name, _recording(_name))


@dataclass
class AttrMarks:
    marked: set[str] = field(default_factory=set)  # attributes the graph now reads by name
    baked: set[str] = field(default_factory=set)  # of those, the ones used as values too
    derived: bool = False  # a constant computed from attributes was folded into the graph

    def free(self, scalars: dict[str, float]) -> set[str]:
        """Attributes every use of which reads the attribute at run time (no check needed)."""
        return set() if self.derived else self.marked - self.baked


def _walk(a, b, mark) -> object:
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return type(a)(_walk(x, y, mark) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
        return {k: _walk(a[k], b[k], mark) for k in a}
    if type(a) is float and type(b) is float and a != b:
        return mark(a, b)
    return a


def mark_attributes(model: torch.nn.Module, graph: fx.GraphModule) -> AttrMarks:
    """Replace, in ``graph``, each constant that is a float attribute of ``model`` by an
    :class:`AttrFloat`; the marks say which attributes are read so and what stays baked."""
    scalars = {k: v for k, v in vars(model).items() if type(v) is float}
    marks = AttrMarks()
    if not scalars:
        return marks
    probes = {
        k: v + _PROBE * (i + 1) * max(1.0, abs(v)) for i, (k, v) in enumerate(scalars.items())
    }
    by_probe = {p: k for k, p in probes.items()}
    try:
        for k, p in probes.items():
            setattr(model, k, p)
        probe = fx.symbolic_trace(model)
    except Exception:  # noqa: BLE001 - foreign code refusing a probe value: nothing marked
        marks.derived = True
        return marks
    finally:
        for k, v in scalars.items():
            setattr(model, k, v)
    nodes, others = list(graph.graph.nodes), list(probe.graph.nodes)
    if [n.op for n in nodes] != [n.op for n in others]:
        marks.derived = True
        return marks

    def mark(a: float, b: float) -> object:
        name = by_probe.get(b)
        if name is None or scalars[name] != a:
            marks.derived = True
            return a
        marks.marked.add(name)
        return AttrFloat(a, name, marks.baked)

    for n, m in zip(nodes, others, strict=True):
        n.args = _walk(n.args, m.args, mark)
        n.kwargs = _walk(n.kwargs, m.kwargs, mark)
    return marks
