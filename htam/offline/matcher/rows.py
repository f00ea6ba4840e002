"""Row-wise operations (reductions and normalizations) decomposed into reductions + primitives.

A "row" is the set of elements that one output of a reduction combines: with the input viewed
as ``(outer, R, inner)`` for the reduced dims ``d0..d1``, row ``(o, i)`` holds the ``R`` elements
``x[o, :, i]``. ``rsize`` is ``R`` as a float (a per-row constant known only at run time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from htam.offline.front.lower import CNode, ShapeVal
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import Arg

if TYPE_CHECKING:
    from htam.offline.matcher.build import Builder


@dataclass
class RowSpec:
    shape: tuple[int, ...]  # the reduced tensor's shape
    d0: int
    d1: int

    @property
    def keep_shape(self) -> tuple[int, ...]:
        return tuple(1 if self.d0 <= d <= self.d1 else n for d, n in enumerate(self.shape))

    @property
    def squeezed_shape(self) -> tuple[int, ...]:
        return tuple(n for d, n in enumerate(self.shape) if not self.d0 <= d <= self.d1)


def norm_dims(dim, rank: int) -> tuple[int, ...]:
    """Reduced dims as sorted non-negative ints; None or () means all dims."""
    dim = dim.value if isinstance(dim, ShapeVal) else dim
    if dim is None or dim == () or dim == []:
        return tuple(range(rank))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted({d % rank for d in dims})) if rank else ()


def reduced_dims(node: CNode) -> tuple[int, ...]:
    """The dims a row operation reduces over, from its canonical attributes."""
    rank = len(node.args[0].shape)
    if node.op in ("layer_norm", "rms_norm"):
        k = len(tuple(node.attrs["normalized_shape"]))
        return tuple(range(rank - k, rank))
    if node.op in ("softmax", "log_softmax", "logsumexp") and node.attrs.get("dim") is None:
        raise NoMatch(f"{node.op} without dim ({node.name})")
    return norm_dims(node.attrs.get("dim"), rank)


def row_spec(node: CNode) -> RowSpec:
    dims = reduced_dims(node)
    if not dims or list(dims) != list(range(dims[0], dims[-1] + 1)):
        raise NoMatch(f"{node.op} ({node.name}) reduces non-adjacent dims {list(dims)}")
    return RowSpec(tuple(node.args[0].shape), dims[0], dims[-1])


def _mean(b: Builder, x: Arg) -> int:
    return b.op("div", b.reduce("rsum", x), b.op("rsize"))


def _var(b: Builder, x: Arg, unbiased: bool) -> tuple[int, int]:
    """(x - mean, variance). The two-pass form; the Welford strategy makes it one pass."""
    d = b.op("sub", x, _mean(b, x))
    count = b.op("sub", b.op("rsize"), 1.0) if unbiased else b.op("rsize")
    return d, b.op("div", b.reduce("rsum", b.op("square", d)), count)


def _norm(b: Builder, x: Arg, p, name: str) -> int:
    if p in (2, 2.0, "fro", None):
        return b.op("sqrt", b.reduce("rsum", b.op("square", x)))
    if p in (1, 1.0):
        return b.reduce("rsum", b.op("abs", x))
    if p == float("inf"):
        return b.reduce("rmax", b.op("abs", x))
    raise NoMatch(f"norm with p={p!r} ({name})")


def _softmax(b: Builder, x: Arg, log: bool) -> int:
    m = b.reduce("rmax", x)
    d = b.op("sub", x, m)
    e = b.op("exp", d)
    s = b.reduce("rsum", e)
    if log:
        return b.op("sub", d, b.op("log", s))
    return b.op("mul", e, b.op("reciprocal", s))


def _layer_norm(b: Builder, n: CNode, x: Arg) -> int:
    d, var = _var(b, x, unbiased=False)
    y = b.op("mul", d, b.op("rsqrt", b.op("add", var, float(n.attrs["eps"]))))
    if isinstance(n.attrs.get("weight"), CNode):
        y = b.op("mul", y, b.arg(n.attrs["weight"]))
    if isinstance(n.attrs.get("bias"), CNode):
        y = b.op("add", y, b.arg(n.attrs["bias"]))
    return y


def _rms_norm(b: Builder, n: CNode, x: Arg) -> int:
    eps = n.attrs.get("eps")
    eps = float(torch.finfo(torch.float32).eps) if eps is None else float(eps)
    ms = _mean(b, b.op("square", x))
    y = b.op("mul", x, b.op("rsqrt", b.op("add", ms, eps)))
    if isinstance(n.attrs.get("weight"), CNode):
        y = b.op("mul", y, b.arg(n.attrs["weight"]))
    return y


def _unbiased(attrs: dict) -> bool:
    if "correction" in attrs:
        return bool(attrs["correction"])
    return bool(attrs.get("unbiased", True))


def _simple(name: str) -> RowRule:
    return lambda b, n, x: b.reduce(name, x)


def _var_std(b: Builder, n: CNode, x: Arg) -> Arg:
    var = _var(b, x, _unbiased(n.attrs))[1]
    return var if n.op == "var" else b.op("sqrt", var)


def _logsumexp(b: Builder, n: CNode, x: Arg) -> Arg:
    m = b.reduce("rmax", x)
    return b.op("add", m, b.op("log", b.reduce("rsum", b.op("exp", b.op("sub", x, m)))))


def _prod(b: Builder, n: CNode, x: Arg) -> Arg:
    """The product of a row as its magnitude ``exp(sum(log|x|))`` (a zero gives ``log 0 =
    -inf``, so 0) times its sign, ``1 - 2 (k mod 2)`` for ``k`` negatives: two sums, so every
    row path (lanes, coalesced, split, C++) computes it. Relative error about ``R`` float32
    roundings of the logs; float32 products of long rows over- or underflow anyway."""
    k = b.reduce("rsum", b.op("lt", x, 0.0))
    odd = b.op("sub", k, b.op("mul", b.op("floor", b.op("mul", k, 0.5)), 2.0))
    sign = b.op("sub", 1.0, b.op("mul", odd, 2.0))
    return b.op("mul", sign, b.op("exp", b.reduce("rsum", b.op("log", b.op("abs", x)))))


def _normalize(b: Builder, n: CNode, x: Arg) -> Arg:
    norm = _norm(b, x, n.attrs.get("p", 2.0), n.name)
    return b.op("div", x, b.op("maximum", norm, float(n.attrs.get("eps", 1e-12))))


RowRule = Callable[["Builder", CNode, Arg], Arg]
# Canonical row op -> its reductions and primitives, given the builder, the node and its input.
ROW_RULES: dict[str, RowRule] = {
    "sum": _simple("rsum"),
    "amax": _simple("rmax"),
    "amin": _simple("rmin"),
    "argmax": _simple("rargmax"),
    "argmin": _simple("rargmin"),
    "mean": lambda b, n, x: _mean(b, x),
    "var": _var_std,
    "std": _var_std,
    "norm": lambda b, n, x: _norm(b, x, n.attrs.get("p", n.attrs.get("ord")), n.name),
    "logsumexp": _logsumexp,
    "softmax": lambda b, n, x: _softmax(b, x, log=False),
    "log_softmax": lambda b, n, x: _softmax(b, x, log=True),
    "layer_norm": lambda b, n, x: _layer_norm(b, n, x),
    "rms_norm": lambda b, n, x: _rms_norm(b, n, x),
    "normalize": _normalize,
    "prod": _prod,
}


def lower_row_op(b: Builder, n: CNode) -> Arg:
    """The reductions and primitives computing the row node ``n`` over the builder's rows."""
    if b.rows is None:
        raise NoMatch(f"reduction {n.op} ({n.name}) outside a row-wise pattern")
    spec = row_spec(n)
    if (spec.shape, spec.d0, spec.d1) != (b.rows.shape, b.rows.d0, b.rows.d1):
        raise NoMatch(
            f"{n.op} ({n.name}) reduces a different block of dims or shape than the "
            "first reduction; one row structure per task is supported"
        )
    if n.attrs.get("dtype") is not None:
        raise NoMatch(f"{n.op} with dtype= ({n.name})")
    x = b.arg(n.args[0])
    rule = ROW_RULES.get(n.op)
    if rule is None:
        raise NoMatch(f"unsupported row operation {n.op} ({n.name})")
    return rule(b, n, x)
