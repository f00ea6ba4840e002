"""Elementwise canonical ops as primitives (the vocabulary of :mod:`htam.offline.ir.expr`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, cast

from htam.offline.front.lower import CNode
from htam.offline.front.missing import family_note
from htam.offline.front.specs import UNARY
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import Arg

if TYPE_CHECKING:
    from htam.offline.matcher.build import Builder

SIMPLE_UNARY = set(UNARY)
SIMPLE_BINARY = {"mul", "maximum", "minimum"}
# a comparison's mask is 0.0 / 1.0 inside the kernel (a bool tensor in torch)
COMPARISONS = {"gt", "ge", "lt", "le"}


def _scalar(value, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, CNode):
        raise NoMatch(f"{what} given as a tensor is not supported")
    return float(value)


def lower_elementwise(b: Builder, n: CNode) -> Arg:
    """The primitives computing the elementwise node ``n`` (its first argument lowered first)."""
    x = b.arg(n.args[0])
    rule = ELEMENTWISE.get(n.op)
    if rule is None:
        if n.op in ("transpose", "permute"):
            raise NoMatch(f"{n.op} ({n.name}) changes the element order; not an elementwise chain")
        raise NoMatch(f"unsupported operation {n.op} ({n.name}){family_note(n.op)}")
    return rule(b, n, x)


def _view(b: Builder, n: CNode, x: Arg) -> Arg:
    _check_shape_op(b, n)
    return x


def _dropout(b: Builder, n: CNode, x: Arg) -> Arg:
    if n.attrs.get("p") and n.attrs.get("training"):
        raise NoMatch(f"dropout with p={n.attrs['p']} in training mode is random ({n.name})")
    return x


def _div(b: Builder, n: CNode, x: Arg) -> Arg:
    if n.attrs.get("rounding_mode") is not None:
        raise NoMatch(f"division with rounding_mode={n.attrs['rounding_mode']!r} ({n.name})")
    return b.op("div", x, b.arg(n.attrs["other"]))


def _gelu(b: Builder, n: CNode, x: Arg) -> Arg:
    return b.op("gelu_tanh" if n.attrs.get("approximate") == "tanh" else "gelu_erf", x)


def _softplus(b: Builder, n: CNode, x: Arg) -> Arg:
    beta, threshold = float(n.attrs["beta"]), float(n.attrs["threshold"])
    return b.op("softplus", x, beta=beta, threshold=threshold)


def _clamp(b: Builder, n: CNode, x: Arg) -> Arg:
    lo = n.attrs.get("min_val", n.attrs.get("min"))
    hi = n.attrs.get("max_val", n.attrs.get("max"))
    return b.op("clamp", x, lo=_scalar(lo, "clamp bound"), hi=_scalar(hi, "clamp bound"))


Rule = Callable[["Builder", CNode, Arg], Arg]
# Canonical op -> the primitives it lowers to, given the builder, the node and its first argument.
ELEMENTWISE: dict[str, Rule] = {
    **{op: (lambda b, n, x: b.op(n.op, x)) for op in SIMPLE_UNARY},
    **{
        op: (lambda b, n, x: b.op(n.op, x, b.arg(n.attrs["other"])))
        for op in SIMPLE_BINARY | COMPARISONS
    },
    "where": lambda b, n, x: b.op("where", x, b.arg(n.attrs["input"]), b.arg(n.attrs["other"])),
    "identity": _view,
    "reshape": _view,
    "dropout": _dropout,
    "add": lambda b, n, x: _add_sub(b, n.op, x, n.attrs),
    "sub": lambda b, n, x: _add_sub(b, n.op, x, n.attrs),
    "rsub": lambda b, n, x: _add_sub(b, n.op, x, n.attrs),
    "div": _div,
    "pow": lambda b, n, x: _pow(b, x, n.attrs["exponent"], n),
    "gelu": _gelu,
    "leaky_relu": lambda b, n, x: b.op("leaky_relu", x, slope=float(n.attrs["negative_slope"])),
    "elu": lambda b, n, x: b.op("elu", x, alpha=float(n.attrs["alpha"])),
    "softplus": _softplus,
    "hardtanh": _clamp,
    "clamp": _clamp,
}


def _add_sub(b: Builder, op: str, x: Arg, attrs: dict) -> Arg:
    other = b.arg(attrs["other"])
    alpha = float(attrs.get("alpha", 1))
    if op == "rsub":  # torch.rsub(x, y, alpha) == y - alpha * x
        x, other = other, x
        op = "sub"
        if alpha != 1.0:
            other = b.op("mul", other, alpha)
    elif alpha != 1.0:
        other = b.op("mul", other, alpha)
    return b.op(op, x, other)


def _pow(b: Builder, x: Arg, exponent, n: CNode) -> Arg:
    if isinstance(x, float):  # c ** t == exp2(t * log2(c)) for c > 0
        base = x
        if base <= 0:
            raise NoMatch(f"power of a non-positive constant base ({n.name})")
        return b.op("exp2", b.op("mul", b.arg(exponent), math.log2(base)))
    p = cast(float, _scalar(exponent, "exponent"))  # pow always has an exponent
    if p == 1.0:
        return x
    if p == 0.5:
        return b.op("sqrt", x)
    if p == -0.5:
        return b.op("rsqrt", x)
    if p == 2.0:
        return b.op("square", x)
    if p == int(p) and -8 <= p <= 8:
        return b.op("powi", x, n=int(p))
    return b.op("powf", x, p=p)


def _check_shape_op(b: Builder, n: CNode) -> None:
    """View-like ops are free only where they cannot change which element meets which."""
    if n.op == "identity":
        return
    src: CNode = n.args[0]
    if n.shape == src.shape:
        return
    rows = b.rows
    kind = b.kind(b.arg(src))
    if rows is not None and kind == "row" and n.shape in (rows.keep_shape, rows.squeezed_shape):
        return
    raise NoMatch(f"reshape {list(src.shape)} -> {list(n.shape)} ({n.name}) inside the pattern")
