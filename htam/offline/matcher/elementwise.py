"""Elementwise canonical ops as primitives (the vocabulary of :mod:`htam.offline.ir.expr`)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from htam.offline.front.lower import CNode
from htam.offline.front.specs import UNARY
from htam.offline.front.trace import NoMatch
from htam.offline.ir.model import Arg

if TYPE_CHECKING:
    from htam.offline.matcher.build import Builder

SIMPLE_UNARY = set(UNARY)
SIMPLE_BINARY = {"mul", "maximum", "minimum"}


def _scalar(value, what: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, CNode):
        raise NoMatch(f"{what} given as a tensor is not supported")
    return float(value)


def lower_elementwise(b: Builder, n: CNode) -> Arg:
    op, attrs = n.op, n.attrs
    x = b.arg(n.args[0])
    if op in SIMPLE_UNARY:
        return b.op(op, x)
    if op in SIMPLE_BINARY:
        return b.op(op, x, b.arg(attrs["other"]))
    if op in ("identity", "reshape"):
        _check_shape_op(b, n)
        return x
    if op == "dropout":
        if attrs.get("p") and attrs.get("training"):
            raise NoMatch(f"dropout with p={attrs['p']} in training mode is random ({n.name})")
        return x
    if op in ("add", "sub", "rsub"):
        return _add_sub(b, op, x, attrs)
    if op == "div":
        if attrs.get("rounding_mode") is not None:
            raise NoMatch(f"division with rounding_mode={attrs['rounding_mode']!r} ({n.name})")
        return b.op("div", x, b.arg(attrs["other"]))
    if op == "pow":
        return _pow(b, x, attrs["exponent"], n)
    if op == "gelu":
        return b.op("gelu_tanh" if attrs.get("approximate") == "tanh" else "gelu_erf", x)
    if op == "leaky_relu":
        return b.op("leaky_relu", x, slope=float(attrs["negative_slope"]))
    if op == "elu":
        return b.op("elu", x, alpha=float(attrs["alpha"]))
    if op == "softplus":
        return b.op("softplus", x, beta=float(attrs["beta"]), threshold=float(attrs["threshold"]))
    if op in ("hardtanh", "clamp"):
        lo = attrs.get("min_val", attrs.get("min"))
        hi = attrs.get("max_val", attrs.get("max"))
        return b.op("clamp", x, lo=_scalar(lo, "clamp bound"), hi=_scalar(hi, "clamp bound"))
    if op in ("transpose", "permute"):
        raise NoMatch(f"{op} ({n.name}) changes the element order; not an elementwise chain")
    raise NoMatch(f"unsupported operation {op} ({n.name})")


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
    p = _scalar(exponent, "exponent")
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
