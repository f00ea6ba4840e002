"""Turn canonical nodes into an SSA :class:`Program` of primitives, checking broadcasting.

Composite operations (softmax, layer norm, variance, norms, logsumexp...) are decomposed into
reductions (``rsum``/``rmax``/...) and elementwise primitives here, so the code generators, the
online-softmax and the Welford rewrites see one vocabulary however the reference spelled it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import torch

from htam.offline.front.attrs import AttrFloat
from htam.offline.front.lower import CNode, ShapeVal
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import Arg, Op, Operand, Program
from htam.offline.matcher.elementwise import COMPARISONS, lower_elementwise
from htam.offline.matcher.rows import RowSpec, lower_row_op

ROW_OPS = {
    "sum",
    "mean",
    "amax",
    "amin",
    "argmax",
    "argmin",
    "logsumexp",
    "var",
    "std",
    "norm",
    "softmax",
    "log_softmax",
    "layer_norm",
    "rms_norm",
    "normalize",
    "prod",
}
GEMM_OPS = {"linear", "matmul", "addmm"}


def classify(shape: tuple[int, ...], full: tuple[int, ...], what: str) -> tuple[str, int, int]:
    """(pattern, tail, head) of an operand of ``shape`` read at ``full`` resolution."""
    rank = len(full)
    if len(shape) > rank:
        raise NoMatch(f"{what} of shape {list(shape)} is larger than the output {list(full)}")
    pad = rank - len(shape)
    s = (1,) * pad + tuple(shape)
    if s == tuple(full):  # the full shape, even of one element (a row of length one reduces)
        return "full", 0, 0
    found = _block(s, full, lambda d: d >= pad and s[d] == full[d])
    # An output dim of size 1 is read alike whether the operand has it or broadcasts it: a
    # channel parameter (C, 1, 1, 1) against (N, C, D, 1, 1) is one block once those are ignored.
    found = found or _block(s, full, lambda d: d >= pad and s[d] == full[d] != 1)
    if found is None:
        raise NoMatch(
            f"{what} of shape {list(shape)} broadcasts against {list(full)} "
            "in a pattern other than one contiguous block of dims"
        )
    return found


def _block(s: tuple[int, ...], full: tuple[int, ...], real_dim) -> tuple[str, int, int] | None:
    """The pattern when the dims ``real_dim`` accepts form one block and every other dim of
    ``s`` is 1; None when they do not."""
    rank = len(full)
    real = [d for d in range(rank) if real_dim(d)]
    if not real or all(x == 1 for x in s):
        return "scalar", 0, 0
    a, b = real[0], real[-1]
    for d in range(rank):
        inside = a <= d <= b
        if (inside and s[d] != full[d]) or (not inside and s[d] != 1):
            return None
    tail, lead = rank - 1 - b, a > 0
    if not lead and tail == 0:
        return "full", 0, 0
    return ("trail" if tail == 0 else "lead" if not lead else "mid"), tail, a


ATTR_PREFIX = "attr_"  # operands holding a float attribute of the model
DEVICE = "__device__"  # placeholder in a scalar input's source, see bind_device


def bind_device(operands: list[Operand], tensor: str) -> list[Operand]:
    """Scalar inputs' tensors made on the device of ``tensor`` (an operand's name, or a
    forward expression yielding a tensor)."""
    source = next((op.source for op in operands if op.name == tensor), tensor)
    device = f"{source}.device"
    return [
        replace(op, source=op.source.replace(DEVICE, device)) if DEVICE in op.source else op
        for op in operands
    ]


def _unit_view(n: CNode) -> bool:
    """A reshape of an input or parameter that only adds or drops dims of size 1."""
    src = n.args[0]
    if not isinstance(src, CNode) or src.op not in ("input", "param"):
        return False
    if not isinstance(src.value, torch.Tensor):
        return False
    return [d for d in n.shape if d != 1] == [d for d in src.shape if d != 1]


def _unit_view_dims(source: str, src: tuple[int, ...], shape: tuple[int, ...]) -> str:
    """The run-time sizes of a unit view (:func:`_unit_view`) of ``source``: each dim that is
    not 1 read from the tensor's own shape, so other sizes than the traced ones still fit."""
    real = iter(j for j, d in enumerate(src) if d != 1)
    dims = ["1" if d == 1 else f"{source}.shape[{next(real)}]" for d in shape]
    return ", ".join(dims) + ("," if len(dims) == 1 else "")


def param_name(path: str) -> str:
    return "p_" + path.replace(".", "_")


class Builder:
    """Builds one program. ``stop`` maps special nodes (the GEMM) to an argument."""

    def __init__(
        self,
        full: tuple[int, ...],
        rows: RowSpec | None = None,
        stop: Callable[[CNode], Arg | None] | None = None,
    ):
        self.full = full
        self.rows = rows
        self.stop = stop or (lambda node: None)
        self.prog = Program()
        self.operands: dict[str, Operand] = {}
        self.memo: dict[int, Arg] = {}

    # -- arguments and kinds -------------------------------------------------------------
    def kind(self, a: Arg) -> str:
        if isinstance(a, int):
            return self.prog.ops[a].kind
        if isinstance(a, str):
            op = self.operands.get(a)
            return "row" if op is not None and op.pattern == "scalar" else "elem"
        return "const"

    def op(self, name: str, *args: Arg, **attrs) -> int:
        kinds = {self.kind(a) for a in args}
        kind = (
            "row"
            if self.rows is not None and "elem" not in kinds and ("row" in kinds or name == "rsize")
            else "elem"
        )
        return self.prog.add(Op(name, tuple(args), tuple(sorted(attrs.items())), kind))

    def reduce(self, name: str, a: Arg) -> int:
        if self.kind(a) == "row":
            raise NoMatch("a reduction of per-row values (nested reductions) is not supported")
        return self.prog.add(Op(name, (a,), (), "row"))

    def arg(self, value) -> Arg:
        if isinstance(value, CNode):
            key = id(value)
            if key not in self.memo:
                self.memo[key] = self._node(value)
            return self.memo[key]
        if isinstance(value, AttrFloat):  # a constructor value: read at run time
            return self._attr_operand(value)
        if isinstance(value, bool | int | float):
            return float(value)
        if isinstance(value, ShapeVal):
            raise NoMatch(
                "a size read from a tensor's shape is used as a number; it would be "
                "frozen at the traced size"
            )
        raise NoMatch(f"unsupported argument {value!r}")

    def build(self, out: CNode) -> Program:
        if isinstance(out.value, torch.Tensor) and out.value.dtype == torch.bool:
            raise NoMatch(f"the output ({out.name}, {out.op}) is a bool mask")
        self.prog.out = self.arg(out)
        return self.prog

    # -- nodes ---------------------------------------------------------------------------
    def _node(self, n: CNode) -> Arg:
        special = self.stop(n)
        if special is not None:
            return special
        if n.op in ("input", "param"):
            return self._leaf(n)
        if n.op == "reshape" and _unit_view(n):
            return self._leaf(n.args[0], n.shape)
        if not isinstance(n.value, torch.Tensor):
            raise NoMatch(f"{n.name} ({n.op}) does not produce a tensor")
        if n.value.dtype not in (torch.float32, torch.int64, torch.bool) or (
            n.value.dtype == torch.int64 and n.op not in ("argmax", "argmin")
        ) or (n.value.dtype == torch.bool and n.op not in COMPARISONS):
            raise NoMatch(f"{n.name} ({n.op}) produces {n.value.dtype}; only float32 is supported")
        if n.op in ROW_OPS:
            if self.rows is None:
                raise NoMatch(f"reduction {n.op} ({n.name}) outside a row-wise pattern")
            return lower_row_op(self, n)
        if n.op in GEMM_OPS:
            raise NoMatch(f"a second matrix product ({n.name}); one GEMM per task is supported")
        self._check_row_broadcast(n)
        return lower_elementwise(self, n)

    def _leaf(self, n: CNode, shape: tuple[int, ...] | None = None) -> str:
        """The operand of an input or parameter; ``shape``: read through a view of it that
        adds or drops dims of size 1 (the same elements in the same order)."""
        if n.op == "input" and type(n.value) is float:
            return self._scalar_input(n)
        if not isinstance(n.value, torch.Tensor):
            raise NoMatch(f"input {n.name} is not a tensor ({type(n.value).__name__})")
        if n.value.dtype not in (torch.float32, torch.bool):
            raise NoMatch(f"input {n.name} is {n.value.dtype}; only float32 is supported")
        is_input = n.op == "input"
        name = n.attrs["name"] if is_input else param_name(n.attrs["path"])
        source = name if is_input else f"_attr(self, {n.attrs['path']!r})"
        if n.value.dtype == torch.bool:  # a mask in arithmetic counts as 0.0 / 1.0
            source = f"{source}.to(torch.float32)"
        viewed = shape is not None and tuple(shape) != tuple(n.shape)
        shape = n.shape if shape is None else shape
        pattern, tail, head = classify(shape, self.full, f"operand {name}")
        key = name if pattern == "full" else f"{name}_{pattern}{tail}"
        if viewed and pattern == "full":  # the output's shape is read from it: view it so
            source = f"{source}.reshape({_unit_view_dims(source, n.shape, shape)})"
            key = key if key not in self.operands else f"{key}_view"
        self.operands.setdefault(key, Operand(key, source, pattern, tail, head))
        return key

    def _attr_operand(self, value: AttrFloat) -> str:
        """The model's float attribute as a one-element buffer ``ModelNew`` makes from it
        (``attr_buffer_lines``): the kernel loads it, so other init values need no new code."""
        name = ATTR_PREFIX + value.attr
        self.operands.setdefault(name, Operand(name, f"self._htam_{value.attr}", "scalar"))
        return name

    def _scalar_input(self, n: CNode) -> str:
        """A float argument of the forward: a one-element tensor the kernel loads (its value
        is read at every call, never the traced one). ``DEVICE`` becomes the primary
        operand's device once the program is built (:func:`bind_device`)."""
        name = n.attrs["name"]
        source = f"torch.full((1,), float({name}), dtype=torch.float32, device={DEVICE})"
        self.operands.setdefault(name, Operand(name, source, "scalar"))
        return name

    def _check_row_broadcast(self, n: CNode) -> None:
        """A per-row value meets a full tensor: it must broadcast along the reduced dims."""
        if self.rows is None:
            return
        args = [a for a in n.args + list(n.attrs.values()) if isinstance(a, CNode)]
        kinds = {id(a): self.kind(self.arg(a)) for a in args}
        if "elem" not in kinds.values():
            return  # per-row values only: the result is per-row too
        for a in args:
            if kinds[id(a)] != "row":
                continue
            aligned = (1,) * (len(self.rows.shape) - len(a.shape)) + a.shape
            if len(a.shape) > len(self.rows.shape) or aligned not in (
                self.rows.keep_shape,
                tuple(1 for _ in self.rows.shape),
            ):
                raise NoMatch(
                    f"per-row value {a.name} of shape {list(a.shape)} does not "
                    f"broadcast along the reduced dims of {list(self.rows.shape)}"
                )
