"""Operations the lowering spells as several canonical nodes: the losses that are one
elementwise chain and one reduction, and ``einsum`` equations that are a matrix product.

Each rule gets the lowering's arguments (canonical nodes, floats) and returns the canonical
node of the result; the nodes it makes in between carry a meta tensor of their shape, which is
all the matcher reads of a value. A form outside a rule's reach raises :class:`NoMatch` naming
the family it would need.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from htam.offline.front.norms import INSTANCE_NORMS
from htam.offline.front.trace import NoMatch

Make = Callable[[str, list, dict, tuple[int, ...]], Any]  # (op, args, attrs, shape) -> CNode


def _reduce(make: Make, loss, reduction: str, what: str):
    if reduction == "none":
        return loss
    if reduction in ("mean", "sum"):
        return make(reduction, [loss], {"dim": None, "keepdim": False, "dtype": None}, ())
    raise NoMatch(
        f"{what} with reduction={reduction!r}: the loss family covers 'none', 'mean' and 'sum'"
    )


def _diff_abs(make: Make, x, y):
    shape = torch.broadcast_shapes(x.shape, y.shape)
    d = make("sub", [x], {"other": y, "alpha": 1}, shape)
    return make("abs", [d], {}, shape), shape


def smooth_l1(make: Make, x, y, reduction: str, beta: float, huber: bool, what: str):
    """smooth_l1(d) = 0.5 m^2 / beta + (|d| - m) with m = min(|d|, beta); huber(d, delta) is
    delta * smooth_l1(d, beta=delta) = 0.5 m^2 + delta (|d| - m). beta 0 is |d| (L1)."""
    a, shape = _diff_abs(make, x, y)
    if beta == 0.0:
        return _reduce(make, a, reduction, what)
    m = make("minimum", [a], {"other": float(beta)}, shape)
    quad = make(
        "mul", [make("square", [m], {}, shape)], {"other": 0.5 if huber else 0.5 / beta}, shape
    )
    lin = make("sub", [a], {"other": m, "alpha": 1}, shape)
    if huber:
        lin = make("mul", [lin], {"other": float(beta)}, shape)
    return _reduce(make, make("add", [quad], {"other": lin, "alpha": 1}, shape), reduction, what)


def mse(make: Make, x, y, reduction: str, what: str):
    shape = torch.broadcast_shapes(x.shape, y.shape)
    d = make("sub", [x], {"other": y, "alpha": 1}, shape)
    return _reduce(make, make("square", [d], {}, shape), reduction, what)


def l1(make: Make, x, y, reduction: str, what: str):
    return _reduce(make, _diff_abs(make, x, y)[0], reduction, what)


def soft_margin(make: Make, x, y, reduction: str, what: str):
    """log(1 + exp(-y x)): softplus of -y x (softplus's threshold only switches to the
    identity where the two agree in float32)."""
    shape = torch.broadcast_shapes(x.shape, y.shape)
    z = make("neg", [make("mul", [x], {"other": y}, shape)], {}, shape)
    loss = make("softplus", [z], {"beta": 1.0, "threshold": 20.0}, shape)
    return _reduce(make, loss, reduction, what)


def cosine_similarity(make: Make, x, y, dim: int, eps: float):
    """sum(x y) / (max(|x|, eps) max(|y|, eps)) along ``dim``, each norm clamped apart as
    torch does; three sums over one row, so one row kernel."""
    shape = torch.broadcast_shapes(x.shape, y.shape)
    dim %= len(shape)
    out = shape[:dim] + shape[dim + 1 :]
    attrs = {"dim": dim, "keepdim": False, "dtype": None}

    def norm(v):
        sq = make("square", [v], {}, tuple(v.shape))
        root = make("sqrt", [make("sum", [sq], attrs, out)], {}, out)
        return make("clamp", [root], {"min": float(eps), "max": None}, out)

    dot = make("sum", [make("mul", [x], {"other": y}, shape)], attrs, out)
    den = make("mul", [norm(x)], {"other": norm(y)}, out)
    return make("div", [dot], {"other": den, "rounding_mode": None}, out)


def _letters(equation: str) -> tuple[list[str], str]:
    lhs, _, out = equation.replace(" ", "").partition("->")
    return lhs.split(","), out


def einsum_as_matmul(equation: str, shapes: list[tuple[int, ...]]) -> bool:
    """Whether ``equation`` over operands of ``shapes`` is ``torch.matmul(a, b)``: ``b`` one
    matrix contracted on its first index with ``a``'s last (``bijl,lk->bijk``), or two
    batches of matrices with the same batch indices (``bij,bjk->bik``)."""
    if "..." in equation or "->" not in equation:
        return False
    terms, out = _letters(equation)
    if len(terms) != 2 or len(shapes) != 2:
        return False
    a, b = terms
    letters = a + b
    if len(a) < 2 or len(b) < 2 or len(set(a)) != len(a) or len(set(b)) != len(b):
        return False
    if len(b) == 2:
        ok = a[-1] == b[0] and b[1] not in a and out == a[:-1] + b[1]
    else:
        ok = len(a) == len(b) and a[:-2] == b[:-2] and a[-1] == b[-2]
        ok = ok and b[-1] not in a and a[-2] not in b and out == a[:-1] + b[-1]
    sizes: dict[str, int] = {}
    for term, shape in zip(terms, shapes, strict=True):
        if len(term) != len(shape):
            return False
        for letter, n in zip(term, shape, strict=True):
            if sizes.setdefault(letter, n) != n:
                return False
    return ok and set(out) <= set(letters)


# -- wiring into the lowering ------------------------------------------------------------------
_LOSSES = {  # function name -> (rule, parameter holding beta / delta and its default)
    "smooth_l1_loss": ("smooth_l1", "beta", 1.0),
    "huber_loss": ("huber", "delta", 1.0),
    "mse_loss": ("mse", None, None),
    "l1_loss": ("l1", None, None),
    "soft_margin_loss": ("soft_margin", None, None),
}


def _loss(make: Make, name: str, x, y, reduction: str, width):
    rule, _, _ = _LOSSES[name]
    if rule in ("smooth_l1", "huber"):
        return smooth_l1(make, x, y, reduction, float(width), rule == "huber", name)
    return {"mse": mse, "l1": l1, "soft_margin": soft_margin}[rule](make, x, y, reduction, name)


def _maker(lowerer, node) -> Make:
    return lambda op, args, attrs, shape: lowerer.synth(node, op, args, attrs, shape)


def _finish(lowerer, node, out):
    """The composite's last node stands for ``node``: its name and traced value."""
    value = lowerer.traced.values.get(node)
    if out.op == "input" or not isinstance(value, torch.Tensor):
        raise NoMatch(f"{node.name}: the composite does not produce the traced tensor")
    out.value, out.name = value, node.name
    return out


def _bound(node, fn, lowered: list, kwargs: dict) -> dict:
    try:
        bound = inspect.signature(fn).bind(*lowered, **kwargs)
    except TypeError as err:
        raise NoMatch(f"{node.name}: arguments of {fn.__name__} not understood ({err})") from err
    bound.apply_defaults()
    return dict(bound.arguments)


def _loss_function(lowerer, node):
    name = node.target.__name__
    fn = getattr(F, name)
    args = _bound(
        node,
        fn,
        [lowerer._arg(a) for a in node.args],
        {k: lowerer._arg(v) for k, v in node.kwargs.items()},
    )
    legacy = [k for k in ("size_average", "reduce") if args.get(k) is not None]
    if legacy or args.get("weight") is not None:
        raise NoMatch(
            f"{name} with {legacy or ['weight']} ({node.name}): the loss family "
            "covers reduction= alone"
        )
    _, width_key, default = _LOSSES[name]
    width = args.get(width_key, default) if width_key else None
    out = _loss(
        _maker(lowerer, node), name, args["input"], args["target"], args["reduction"], width
    )
    return _finish(lowerer, node, out)


def _loss_module(lowerer, node, module):
    name = _MODULE_LOSSES[type(module)]
    _, width_key, _ = _LOSSES[name]
    width = getattr(module, width_key) if width_key else None
    if len(node.args) != 2 or node.kwargs:
        raise NoMatch(f"{type(module).__name__} called with other than (input, target)")
    x, y = (lowerer._arg(a) for a in node.args)
    out = _loss(_maker(lowerer, node), name, x, y, module.reduction, width)
    return _finish(lowerer, node, out)


def _cosine_similarity(lowerer, node):
    # a builtin without a signature: cosine_similarity(x1, x2, dim=1, eps=1e-8)
    names = ("x1", "x2", "dim", "eps")
    if len(node.args) > 4 or set(node.kwargs) - set(names):
        raise NoMatch(f"cosine_similarity ({node.name}): arguments not understood")
    args = dict(zip(names, node.args, strict=False)) | dict(node.kwargs)
    x, y = lowerer._arg(args.get("x1")), lowerer._arg(args.get("x2"))
    dim, eps = lowerer._arg(args.get("dim", 1)), lowerer._arg(args.get("eps", 1e-8))
    shapes = [tuple(getattr(v, "shape", ())) for v in (x, y)]
    if not shapes[0] or shapes[0] != shapes[1]:
        raise NoMatch(f"cosine_similarity ({node.name}) of operands of different shapes")
    if not isinstance(dim, int) or not isinstance(eps, int | float):
        raise NoMatch(f"cosine_similarity ({node.name}) with a dim or eps known at run time only")
    out = cosine_similarity(_maker(lowerer, node), x, y, dim, eps)
    return _finish(lowerer, node, out)


def _einsum(lowerer, node):
    equation, *operands = node.args
    if len(operands) == 1 and isinstance(operands[0], list | tuple):
        operands = list(operands[0])
    lowered = [lowerer._arg(a) for a in operands]
    shapes = [getattr(x, "shape", None) for x in lowered]
    if not isinstance(equation, str) or None in shapes or not einsum_as_matmul(equation, shapes):
        raise NoMatch(
            f"einsum {equation!r} ({node.name}) is not a matrix product; the einsum family "
            "covers 'bijl,lk->bijk' and batched 'bij,bjk->bik' forms"
        )
    out = lowerer.synth(node, "matmul", [lowered[0]], {"other": lowered[1]}, ())
    return _finish(lowerer, node, out)


def _exclusive_scan(lowerer, node):
    """``cat((zeros of one slice, cumsum(x.narrow(dim, 0, n - 1), dim)), dim)``: the exclusive
    cumulative sum of ``x`` along ``dim`` (each position the sum of those before it)."""
    parts = lowerer._arg(node.args[0])
    dim = node.kwargs.get("dim", node.args[1] if len(node.args) > 1 else 0)
    value = lowerer.traced.values.get(node)
    if not isinstance(value, torch.Tensor) or not isinstance(dim, int) or len(parts) != 2:
        raise NoMatch(f"concatenation ({node.name}): only an exclusive scan's is supported")
    zeros, scan = parts
    rank = value.dim()
    dim %= rank
    narrow = scan.args[0] if getattr(scan, "op", None) == "cumsum" else None
    x = narrow.args[0] if getattr(narrow, "op", None) == "narrow" else None
    length = getattr(narrow, "attrs", {}).get("length")
    length = getattr(length, "value", length)
    ok = (
        x is not None
        and getattr(zeros, "op", None) == "zeros_like"
        and scan.attrs["dim"] % rank == dim
        and narrow.attrs["dim"] % rank == dim
        and narrow.attrs["start"] == 0
        and length == x.shape[dim] - 1
        and tuple(value.shape) == tuple(x.shape)
    )
    if not ok:
        raise NoMatch(
            f"concatenation ({node.name}): the scan family reads a cat only as an exclusive "
            "cumsum (zeros, then the cumsum of all but the last slice)"
        )
    out = lowerer.synth(node, "cumsum", [x], {"dim": dim, "dtype": None, "exclusive": True}, ())
    return _finish(lowerer, node, out)


COMPOSITE_FUNCTIONS = {
    **{name: _loss_function for name in _LOSSES},
    "einsum": _einsum,
    "cosine_similarity": _cosine_similarity,
    "cat": _exclusive_scan,
}
_MODULE_LOSSES = {
    torch.nn.SmoothL1Loss: "smooth_l1_loss",
    torch.nn.HuberLoss: "huber_loss",
    torch.nn.MSELoss: "mse_loss",
    torch.nn.L1Loss: "l1_loss",
    torch.nn.SoftMarginLoss: "soft_margin_loss",
}
COMPOSITE_MODULES: dict[type, Callable[..., Any]] = {
    **{cls: _loss_module for cls in _MODULE_LOSSES},
    **INSTANCE_NORMS,
}
